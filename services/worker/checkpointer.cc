#include "services/worker/checkpointer.h"
#include "services/worker/checkpointer_internal.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/remote/server_side_checkpoint.h"
#include "common/trace/trace.h"
#include "proto/dataserver.pb.h"
#include "services/worker/model_buffers.h"

namespace tandem {
namespace worker {
namespace {

// Optimizer state travels from rank 0 in pieces of this many floats, so a
// rank never holds more than its own slice plus one piece.
constexpr int64_t kBroadcastFloats = int64_t{1} << 20;
// The largest loss-scaler record a restore carries (its format is 48 bytes).
constexpr size_t kMaxScalerBytes = 120;

// Checks that `c` (the whole vector) can fill `opt`'s state, before anything
// is copied: same optimizer, every buffer present and whole.
absl::Status CheckOptimizerState(const checkpoint::Checkpoint& c, const std::string& path,
                                 optim::Optimizer* opt) {
  std::vector<optim::StateBuffer> buffers = opt->state();
  if (c.optimizer_name != opt->name() && !(buffers.empty() && c.optimizer_state.empty())) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " holds the state of optimizer '", c.optimizer_name, "' but this run uses '",
        opt->name(), "': resume with the same --optimizer"));
  }
  if (buffers.size() != c.optimizer_state.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " holds ", c.optimizer_state.size(), " optimizer state buffers but '", opt->name(),
        "' has ", buffers.size(), " (different optimizer options, e.g. momentum on/off? "
        "--sync compressed with momentum_correction=1 keeps the momentum in the strategy, so "
        "its sgd has no momentum buffer: resume with the --momentum and --sync_opt the "
        "checkpoint was written with)"));
  }
  for (const optim::StateBuffer& b : buffers) {
    const std::vector<float>* src = c.FindOptimizerState(b.name);
    if (src == nullptr || static_cast<int64_t>(src->size()) != c.total_params) {
      return absl::DataLossError(
          absl::StrCat(path, " has no optimizer state '", b.name, "' of ", c.total_params,
                       " values"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<float*> Checkpointer::HostParams() {
  tensor::FlatStorage& storage = model_->storage();
  if (staging_ == nullptr) {
    // A model on a GPU copies into page-locked memory (full link rate);
    // without a usable device, pageable memory.
    absl::StatusOr<std::unique_ptr<HostStaging>> pinned = MakePinnedStaging();
    if (pinned.ok()) {
      staging_ = *std::move(pinned);
    } else {
      LOG(INFO) << "checkpoint staging in pageable memory: " << pinned.status();
      staging_ = MakePageableStaging();
    }
  }
  ASSIGN_OR_RETURN(float* host, staging_->Reserve(storage.size()));
  RETURN_IF_ERROR(
      backend_->CopyToHost(host, storage.params(), storage.size() * sizeof(float)));
  return host;
}

namespace {

// The checkpoint's fit to this run, before anything is copied: size,
// optimizer state, data cursor (into *dc).
absl::Status CheckFits(const checkpoint::Checkpoint& read, const std::string& path, int64_t n,
                       optim::Optimizer* opt, v1::DataCursor* dc) {
  if (read.total_params != n) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " holds ", read.total_params, " parameters but this model has ", n));
  }
  if (opt != nullptr) RETURN_IF_ERROR(CheckOptimizerState(read, path, opt));
  const std::string* cursor = read.FindBlob("data_cursor");
  if (cursor == nullptr || !dc->ParseFromString(*cursor)) {
    return absl::DataLossError(absl::StrCat(path, " has no readable data cursor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> Checkpointer::Restore(Generation& g, TrainingState* state) {
  // Rank 0 may fall back to an earlier commit; the others only need to
  // know whether there is a checkpoint at all.
  std::string path = g.join.resume_from().path();
  restored_path_.clear();
  const int64_t committed = path.empty() ? -1 : g.join.resume_from().step();
  ASSIGN_OR_RETURN(recovery_, memory_.TryRestore(g, committed));
  if (!recovery_.restored && backend_->host_accessible()) {
    tensor::FlatStorage& storage = model_->storage();
    ASSIGN_OR_RETURN(MemoryRecovery from_servers,
                     servers_.TryRestore(g, committed, storage.params(), storage.size()));
    from_servers.reached = std::max(from_servers.reached, recovery_.reached);
    // Why peer memory could not serve (the two-fault case) is still the
    // reason the disk is used when the servers hold nothing either.
    if (from_servers.not_from_peers.empty()) {
      from_servers.not_from_peers = recovery_.not_from_peers;
    }
    recovery_ = from_servers;
  }
  if (recovery_.restored) {
    RETURN_IF_ERROR(RestoreFromMemory(g, state));
    memory_.MarkLive();
    return true;
  }
  memory_.Invalidate();  // the parameters are overwritten from here on
  // header: ok, step, epoch, samples_in_epoch
  int64_t header[4] = {1, 0, 0, 0};
  absl::Status load;
  std::optional<checkpoint::Checkpoint> c;  // rank 0: the whole vector
  if (g.rank() == 0) {
    load = LoadOnRank0(g, &path, header, &c);
    if (!load.ok()) {
      header[0] = 0;
      load = Annotate(load, absl::StrCat("rank 0 could not restore ",
                                         path.empty() ? "the initial state" : path));
    }
  }
  RETURN_IF_ERROR(g.ctl->Broadcast(header, sizeof(header), 0));
  if (header[0] == 0) {
    if (!load.ok()) return absl::InternalError(std::string(load.message()));
    return absl::InternalError("rank 0 could not restore the last checkpoint (see its log)");
  }
  RETURN_IF_ERROR(BroadcastParams(g));
  if (g.sync->optimizer() != nullptr) {
    RETURN_IF_ERROR(ReshardOptimizerState(g, c.has_value() ? &*c : nullptr, !path.empty()));
  }
  LoadExtraState(g, c.has_value() ? &*c : nullptr, path);
  RETURN_IF_ERROR(g.sync->StateLoaded());
  RETURN_IF_ERROR(BroadcastModelBuffers(*g.ctl, g.rank(), *model_,
                                        c.has_value() ? c->FindBlob(kBuffersBlob) : nullptr));
  const std::string* scaler = c.has_value() ? c->FindBlob("loss_scaler") : nullptr;
  RETURN_IF_ERROR(BroadcastLossScaler(g, scaler, 0, &state->loss_scaler));
  state->step = header[1];
  state->cursor = data::Cursor{header[2], 0};
  state->samples_in_epoch = header[3];
  if (!path.empty()) state->checkpoint_step = state->step;
  memory_.MarkLive();
  return !path.empty();
}

// Parameters and optimizer state are in place (TryRestore); the rest of a
// restore, from the source rank: compressed's per-rank state starts at zero
// (memory_state.h), the model's buffers and the loss scaler are the
// source's, step and data position the agreed ones.
absl::Status Checkpointer::RestoreFromMemory(Generation& g, TrainingState* state) {
  const int source = recovery_.source;
  LoadExtraState(g, nullptr, "");
  RETURN_IF_ERROR(g.sync->StateLoaded());
  const std::string buffers = model_->SaveBuffers();
  RETURN_IF_ERROR(BroadcastModelBuffers(*g.ctl, g.rank(), *model_, &buffers, source));
  const std::string scaler = state->loss_scaler;
  RETURN_IF_ERROR(BroadcastLossScaler(g, &scaler, source, &state->loss_scaler));
  state->step = recovery_.step;
  state->cursor = data::Cursor{recovery_.epoch, 0};
  state->samples_in_epoch = recovery_.samples_in_epoch;
  // The same on every rank (Write's skip is collective): on disk already
  // only when the last commit is this very step.
  const v1::CheckpointRecord& committed = g.join.resume_from();
  state->checkpoint_step =
      !committed.path().empty() && committed.step() == state->step ? state->step : -1;
  return absl::OkStatus();
}

absl::Status Checkpointer::LoadOnRank0(Generation& g, std::string* path, int64_t header[4],
                                       std::optional<checkpoint::Checkpoint>* c) {
  if (path->empty()) return model_->Initialize(o_.seed);
  v1::DataCursor dc;
  ASSIGN_OR_RETURN(checkpoint::Checkpoint read, ReadNewestReadable(g, path, &dc));
  tensor::FlatStorage& storage = model_->storage();
  RETURN_IF_ERROR(backend_->CopyToDevice(storage.params(), read.params.data(),
                                         storage.size() * sizeof(float)));
  header[1] = read.step;
  header[2] = dc.epoch();
  header[3] = dc.samples_in_epoch();
  *c = std::move(read);
  restored_path_ = *path;
  return absl::OkStatus();
}

// A manifest (any strategy, any world size) or a single whole file.
// Everything is checked before anything is copied. A committed checkpoint
// that cannot be read (bad checksum, truncated, gone) is never loaded: the
// previous commit is tried instead, with a warning naming the file. A
// readable one that does not fit this run (another model or optimizer) is
// an error, not a reason to fall back.
absl::StatusOr<checkpoint::Checkpoint> Checkpointer::ReadNewestReadable(Generation& g,
                                                                        std::string* path,
                                                                        v1::DataCursor* dc) {
  std::vector<const v1::CheckpointRecord*> candidates = {&g.join.resume_from()};
  for (const v1::CheckpointRecord& e : g.join.earlier_checkpoints()) {
    if (!e.path().empty()) candidates.push_back(&e);
  }
  checkpoint::ReadOptions ro;
  ro.expected_model_fingerprint = o_.fingerprint;
  absl::Status load;
  for (size_t i = 0; i < candidates.size(); ++i) {
    *path = candidates[i]->path();
    absl::StatusOr<checkpoint::Checkpoint> read = checkpoint::ReadWholeCheckpoint(*path, ro);
    load = read.ok() ? CheckFits(*read, *path, model_->storage().size(), g.sync->optimizer(), dc)
                     : read.status();
    if (load.ok()) return read;
    const bool unreadable =
        absl::IsDataLoss(load) || absl::IsNotFound(load) || absl::IsOutOfRange(load);
    if (!unreadable) return load;
    std::string warning = absl::StrCat("checkpoint ", *path, " (step ", candidates[i]->step(),
                                       ") is unreadable and was not loaded: ", load.message());
    if (i + 1 < candidates.size()) {
      absl::StrAppend(&warning, "; falling back to the previous committed checkpoint ",
                      candidates[i + 1]->path(), " (step ", candidates[i + 1]->step(), ")");
    } else {
      absl::StrAppend(&warning, "; no earlier committed checkpoint to fall back to");
    }
    LOG(WARNING) << warning;
    warnings_.push_back(warning);
  }
  return load;
}

// Broadcast host-side over the control mesh: device parameters are staged
// through staging_ (HostParams).
absl::Status Checkpointer::BroadcastParams(Generation& g) {
  tensor::FlatStorage& storage = model_->storage();
  const int64_t bytes = storage.size() * sizeof(float);
  if (backend_->host_accessible()) return g.ctl->Broadcast(storage.params(), bytes, 0);
  ASSIGN_OR_RETURN(float* host, HostParams());
  RETURN_IF_ERROR(g.ctl->Broadcast(host, bytes, 0));
  return backend_->CopyToDevice(storage.params(), host, bytes);
}

// Resharding: rank 0 sends each whole buffer in pieces; every rank keeps
// the part of each piece that falls in its owned range (the whole vector
// for allreduce, its ZeRO shard otherwise). Without a checkpoint the state
// starts from zero.
absl::Status Checkpointer::ReshardOptimizerState(Generation& g, checkpoint::Checkpoint* c,
                                                 bool from_checkpoint) {
  const int64_t n = model_->storage().size();
  const optim::ParamRange owned = g.sync->owned_range();
  std::vector<float> piece;
  if (from_checkpoint && g.rank() != 0) piece.resize(std::min(n, kBroadcastFloats));
  for (optim::StateBuffer& b : g.sync->optimizer()->state()) {
    if (!from_checkpoint) {
      std::fill(b.data.begin(), b.data.end(), 0.f);
      continue;
    }
    float* whole = nullptr;  // rank 0: checked present in CheckOptimizerState
    if (g.rank() == 0) {
      for (auto& [name, values] : c->optimizer_state) {
        if (name == b.name) whole = values.data();
      }
    }
    for (int64_t lo = 0; lo < n; lo += kBroadcastFloats) {
      const int64_t count = std::min(kBroadcastFloats, n - lo);
      float* buf = g.rank() == 0 ? whole + lo : piece.data();
      RETURN_IF_ERROR(g.ctl->Broadcast(buf, count * sizeof(float), 0));
      const int64_t a = std::max(lo, owned.lo), z = std::min(lo + count, owned.hi);
      if (z > a) std::memcpy(b.data.data() + (a - owned.lo), buf + (a - lo), (z - a) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

// Extra strategy state is rank 0's and reloads only where it still fits
// (same strategy and layout); otherwise it starts from zero.
void Checkpointer::LoadExtraState(Generation& g, const checkpoint::Checkpoint* c,
                                  const std::string& path) {
  for (optim::StateBuffer& b : g.sync->extra_state()) {
    const std::string* blob = g.rank() == 0 && c != nullptr ? c->FindBlob(BlobName(b)) : nullptr;
    if (blob != nullptr && blob->size() == b.data.size() * sizeof(float)) {
      std::memcpy(b.data.data(), blob->data(), blob->size());
      continue;
    }
    if (g.rank() == 0 && c != nullptr) {
      LOG(WARNING) << path << " has no " << BlobName(b) << " of " << b.data.size()
                   << " floats (another strategy or world size): it starts from zero";
    }
    std::fill(b.data.begin(), b.data.end(), 0.f);
  }
}

// fp16's loss-scaler record (a few dozen bytes; none in other modes).
absl::Status Checkpointer::BroadcastLossScaler(Generation& g, const std::string* blob, int root,
                                               std::string* out) {
  char scaler[kMaxScalerBytes + 1] = {0};
  if (g.rank() == root && blob != nullptr && blob->size() <= kMaxScalerBytes) {
    scaler[0] = static_cast<char>(blob->size());
    std::memcpy(scaler + 1, blob->data(), blob->size());
  }
  RETURN_IF_ERROR(g.ctl->Broadcast(scaler, sizeof(scaler), root));
  out->assign(scaler + 1, static_cast<unsigned char>(scaler[0]));
  return absl::OkStatus();
}

// Who writes what for one step's checkpoint, and where it is committed.

absl::Status Checkpointer::EnableMetrics(Metrics* metrics) {
  if (metrics_ != nullptr || metrics == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(metrics_, CheckpointMetrics::Create(metrics));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Checkpointer::Write(Generation& g, TrainingState* state) {
  // A background write in flight finishes first: files reach the disk
  // and the coordinator in step order.
  if (bg_ != nullptr) bg_->Drain();
  if (o_.dir.empty()) return std::string();
  if (state->step == state->checkpoint_step) return std::string();  // already on disk
  trace::Span span("checkpoint write", "io", -1, state->step);
  ASSIGN_OR_RETURN(WritePlan plan, PlanWrite(g, *state));
  return WritePlanned(g, state, plan);
}

absl::StatusOr<std::string> Checkpointer::WritePlanned(Generation& g, TrainingState* state,
                                                       const WritePlan& plan) {
  const absl::Time start = absl::Now();
  absl::Status wrote = g.sync->SyncStateToHost();
  if (plan.i_write && wrote.ok()) wrote = WriteShard(g, *state, plan);
  // Every shard must be on disk before the manifest names it.
  RETURN_IF_ERROR(AllWrote(g, wrote, state->step));
  int64_t committed = 1;
  absl::Status commit;
  if (g.rank() == 0) {
    commit = plan.on_servers != nullptr ? CommitOnServers(g, *state, plan)
                                        : CommitShards(g, *state, plan);
    // 1, or the negated status code: the other ranks fail with the same
    // kind of error (a refused commit because the generation ended is a
    // membership change for them too, not a reason to exit).
    committed = commit.ok() ? 1 : -static_cast<int64_t>(commit.code());
  }
  RETURN_IF_ERROR(g.ctl->Broadcast(&committed, sizeof(committed), 0));
  if (!commit.ok()) return commit;
  if (committed != 1) {
    const auto code = committed < 0 ? static_cast<absl::StatusCode>(-committed)
                                    : absl::StatusCode::kInternal;
    return absl::Status(code, absl::StrCat("rank 0 could not write the manifest or commit the "
                                           "step ", state->step, " checkpoint (see its log)"));
  }
  state->checkpoint_step = state->step;
  if (metrics_ != nullptr && plan.i_write) {
    metrics_->RecordWrite(absl::ToDoubleSeconds(absl::Now() - start), -1);
  }
  return g.rank() == 0 ? plan.path : std::string();
}

// Who writes what: every rank's owned range, then one shard per distinct
// range, written by the lowest rank owning it.
absl::StatusOr<Checkpointer::WritePlan> Checkpointer::PlanWrite(Generation& g,
                                                                const TrainingState& state) {
  const int world = g.world();
  WritePlan plan;
  plan.owned = g.sync->owned_range();
  const int64_t mine[2] = {plan.owned.lo, plan.owned.hi};
  std::vector<int64_t> all(2 * world);
  RETURN_IF_ERROR(g.ctl->AllGather(mine, all.data(), sizeof(mine)));
  std::vector<optim::ParamRange> ranges;
  for (int r = 0; r < world; ++r) ranges.push_back({all[2 * r], all[2 * r + 1]});
  absl::StatusOr<std::vector<checkpoint::ShardWriter>> writers =
      checkpoint::PlanShardWriters(ranges, model_->storage().size());
  if (!writers.ok()) {
    return absl::InternalError(absl::StrCat("strategy '", g.sync->name(),
                                            "' cannot be checkpointed: ",
                                            writers.status().message()));
  }
  plan.writers = std::move(*writers);
  // One whole shard (allreduce): the single-file layout, committed as is.
  // Several: shard files, then the manifest, written last by rank 0.
  plan.single = plan.writers.size() == 1;
  plan.manifest = checkpoint::ManifestPath(o_.dir, state.step);
  plan.single_path =
      absl::StrFormat("%s/step-%08d.tckpt", o_.dir, static_cast<long long>(state.step));
  for (const checkpoint::ShardWriter& w : plan.writers) {
    plan.i_write = plan.i_write || w.rank == g.rank();
  }
  // ps / hybrid: the shard servers write their ranges (parameters and
  // optimizer state) themselves, rank 0 the manifest naming them.
  plan.on_servers = dynamic_cast<sync::ServerSideCheckpoint*>(g.sync.get());
  if (plan.on_servers != nullptr && !plan.on_servers->CanSaveOnServers()) plan.on_servers = nullptr;
  if (plan.on_servers != nullptr) {
    plan.on_servers->ExpectServerSave();
    plan.i_write = false;
  }
  plan.path = plan.single && plan.on_servers == nullptr ? plan.single_path : plan.manifest;
  plan.cursor.set_epoch(state.cursor.epoch);
  plan.cursor.set_step_in_epoch(state.cursor.step_in_epoch);
  // The exact position: a generation of any world or batch size resumes there.
  plan.cursor.set_samples_in_epoch(state.samples_in_epoch);
  return plan;
}

absl::Status Checkpointer::WithShardView(
    Generation& g, const TrainingState& state, const WritePlan& plan,
    const std::function<absl::Status(const checkpoint::CheckpointView&)>& use) {
  tensor::FlatStorage& storage = model_->storage();
  const float* params = storage.params();
  if (!backend_->host_accessible()) {
    ASSIGN_OR_RETURN(params, HostParams());
  }
  const optim::ParamRange owned = plan.owned;
  checkpoint::CheckpointView v;
  v.model_fingerprint = o_.fingerprint;
  v.step = state.step;
  v.total_params = storage.size();
  v.range_lo = owned.lo;
  v.range_hi = owned.hi;
  v.params = absl::MakeConstSpan(params + owned.lo, owned.size());
  if (g.sync->optimizer() != nullptr) checkpoint::AddOptimizerState(*g.sync->optimizer(), &v);
  const std::vector<optim::StateBuffer> extra = g.sync->extra_state();
  std::vector<std::string> names;
  names.reserve(extra.size());
  for (const optim::StateBuffer& b : extra) {
    names.push_back(BlobName(b));
    v.blobs.push_back({names.back(),
                       absl::string_view(reinterpret_cast<const char*>(b.data.data()),
                                         b.data.size() * sizeof(float))});
  }
  const std::string cursor_bytes = plan.cursor.SerializeAsString();
  const std::string buffers = model_->SaveBuffers();
  if (owned.lo == 0) {  // the shard whose blobs a restore reads
    if (!buffers.empty()) v.blobs.push_back({kBuffersBlob, buffers});
    v.blobs.push_back({"data_cursor", cursor_bytes});
    v.blobs.push_back({"model_spec", o_.model_text});
    if (!state.loss_scaler.empty()) v.blobs.push_back({"loss_scaler", state.loss_scaler});
  }
  return use(v);
}

absl::Status Checkpointer::WriteShard(Generation& g, const TrainingState& state,
                                      const WritePlan& plan) {
  RETURN_IF_ERROR(MakeDirectories(o_.dir));
  const std::string path = plan.single ? plan.single_path : ShardPath(g, state.step);
  return WithShardView(g, state, plan, [&](const checkpoint::CheckpointView& v) {
    return checkpoint::WriteCheckpoint(path, v, o_.write_options);
  });
}

std::string Checkpointer::ShardPath(Generation& g, int64_t step) const {
  return absl::StrCat(o_.dir, "/", checkpoint::ShardFileName(step, g.rank(), g.world()));
}

absl::Status Checkpointer::AllWrote(Generation& g, const absl::Status& wrote, int64_t step) {
  const int world = g.world();
  std::vector<int64_t> ok(world);
  const int64_t my_ok = wrote.ok() ? 1 : 0;
  RETURN_IF_ERROR(g.ctl->AllGather(&my_ok, ok.data(), sizeof(my_ok)));
  for (int r = 0; r < world; ++r) {
    if (ok[r] == 1) continue;
    if (r == g.rank()) return wrote;
    return absl::InternalError(absl::StrCat("rank ", r, " could not write its shard of the step ",
                                            step, " checkpoint (see its log); "
                                            "nothing was committed"));
  }
  return absl::OkStatus();
}

// Rank 0's commit: the manifest's header and the record sent to the
// coordinator, the same whoever wrote the shards.
checkpoint::Manifest Checkpointer::ManifestHeader(Generation& g, int64_t step) const {
  checkpoint::Manifest m;
  m.model_fingerprint = o_.fingerprint;
  m.step = step;
  m.total_params = model_->storage().size();
  m.world_size = g.world();
  m.strategy = g.sync->name();
  m.optimizer_name = g.sync->optimizer() != nullptr ? g.sync->optimizer()->name() : "";
  return m;
}

checkpoint::Manifest Checkpointer::ShardManifest(Generation& g, int64_t step,
                                                 const WritePlan& plan) const {
  checkpoint::Manifest m = ManifestHeader(g, step);
  for (const checkpoint::ShardWriter& w : plan.writers) {
    m.shards.push_back({w.lo, w.hi, checkpoint::ShardFileName(step, w.rank, g.world())});
  }
  return m;
}

v1::CheckpointRecord Checkpointer::Record(Generation& g, int64_t step,
                                          const v1::DataCursor& cursor,
                                          const std::string& committed_path) const {
  v1::CheckpointRecord record;
  record.set_step(step);
  record.set_path(committed_path);
  *record.mutable_cursor() = cursor;
  record.set_world_size(g.world());
  record.set_unix_millis(absl::ToUnixMillis(absl::Now()));
  return record;
}

absl::Status Checkpointer::CommitAt(Generation& g, int64_t step, const v1::DataCursor& cursor,
                                    const std::string& committed_path) {
  return client_->CommitCheckpoint(Record(g, step, cursor, committed_path));
}

absl::Status Checkpointer::CommitShards(Generation& g, const TrainingState& state,
                                        const WritePlan& plan) {
  if (!plan.single) {
    RETURN_IF_ERROR(checkpoint::WriteManifest(plan.manifest, ShardManifest(g, state.step, plan)));
  }
  return CommitAt(g, state.step, plan.cursor, plan.path);
}

}  // namespace worker
}  // namespace tandem
