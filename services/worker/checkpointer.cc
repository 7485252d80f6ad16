#include "services/worker/checkpointer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint/checkpoint.h"
#include "common/io/file.h"
#include "absl/time/clock.h"
#include "common/status/status_macros.h"
#include "proto/dataserver.pb.h"

namespace tandem {
namespace worker {
namespace {


std::string BlobName(const optim::StateBuffer& b) { return absl::StrCat("sync/", b.name); }

bool OwnsAll(const sync::GradientSync& s, int64_t n) {
  const optim::ParamRange r = s.owned_range();
  return r.lo == 0 && r.hi == n;
}

}  // namespace

absl::StatusOr<float*> Checkpointer::HostParams() {
  tensor::FlatStorage& storage = model_->storage();
  host_params_.resize(storage.size());
  RETURN_IF_ERROR(backend_->CopyToHost(host_params_.data(), storage.params(),
                                       storage.size() * sizeof(float)));
  return host_params_.data();
}

absl::StatusOr<bool> Checkpointer::Restore(Generation& g, TrainingState* state) {
  tensor::FlatStorage& storage = model_->storage();
  const int64_t n = storage.size();
  optim::Optimizer* opt = g.sync->optimizer();
  std::vector<optim::StateBuffer> extra = g.sync->extra_state();
  const std::string& path = g.join.resume_from().path();
  // header: ok, step, epoch, samples_in_epoch
  int64_t header[4] = {1, 0, 0, 0};
  absl::Status load;
  if (g.rank() == 0) {
    if (path.empty()) {
      load = model_->Initialize(o_.seed);
    } else if (!OwnsAll(*g.sync, n)) {
      load = absl::UnimplementedError(absl::StrCat(
          "strategy '", g.sync->name(), "' shards its state; resuming it from ", path,
          " needs resharding checkpoints, which this build does not have"));
    } else {
      checkpoint::ReadOptions ro;
      ro.expected_model_fingerprint = o_.fingerprint;
      absl::StatusOr<checkpoint::Checkpoint> c = checkpoint::ReadCheckpoint(path, ro);
      if (!c.ok()) {
        load = c.status();
      } else if (c->total_params != n || c->range_lo != 0 || c->range_hi != n) {
        load = absl::FailedPreconditionError(
            absl::StrCat(path, " holds a range of another size than this model's"));
      } else {
        load = backend_->CopyToDevice(storage.params(), c->params.data(),
                                      c->params.size() * sizeof(float));
        if (load.ok() && opt != nullptr) load = checkpoint::RestoreOptimizerState(*c, opt);
        for (optim::StateBuffer& b : extra) {
          if (!load.ok()) break;
          const std::string* blob = c->FindBlob(BlobName(b));
          if (blob == nullptr || blob->size() != b.data.size() * sizeof(float)) {
            load = absl::DataLossError(absl::StrCat(path, " has no ", BlobName(b), " of ",
                                                    b.data.size(), " floats"));
          } else {
            std::memcpy(b.data.data(), blob->data(), blob->size());
          }
        }
        const std::string* cursor = c->FindBlob("data_cursor");
        v1::DataCursor dc;
        if (load.ok() && (cursor == nullptr || !dc.ParseFromString(*cursor))) {
          load = absl::DataLossError(absl::StrCat(path, " has no readable data cursor"));
        }
        header[1] = c->step;
        header[2] = dc.epoch();
        header[3] = dc.samples_in_epoch();
      }
    }
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
  // Broadcast host-side over the control mesh: device parameters are
  // staged through host_params_.
  if (!backend_->host_accessible()) {
    ASSIGN_OR_RETURN(float* host, HostParams());
    RETURN_IF_ERROR(g.ctl->Broadcast(host, n * sizeof(float), 0));
    RETURN_IF_ERROR(backend_->CopyToDevice(storage.params(), host, n * sizeof(float)));
  } else {
    RETURN_IF_ERROR(g.ctl->Broadcast(storage.params(), n * sizeof(float), 0));
  }
  if (opt != nullptr) {
    for (optim::StateBuffer& b : opt->state()) {
      if (path.empty()) {
        std::fill(b.data.begin(), b.data.end(), 0.f);
      } else {
        RETURN_IF_ERROR(g.ctl->Broadcast(b.data.data(), b.data.size() * sizeof(float), 0));
      }
    }
  }
  if (path.empty() || g.rank() != 0) {
    for (optim::StateBuffer& b : extra) std::fill(b.data.begin(), b.data.end(), 0.f);
  }
  RETURN_IF_ERROR(g.sync->StateLoaded());
  state->step = header[1];
  state->cursor = data::Cursor{header[2], 0};
  state->samples_in_epoch = header[3];
  if (!path.empty()) state->checkpoint_step = state->step;
  return !path.empty();
}

absl::StatusOr<std::string> Checkpointer::Write(Generation& g, TrainingState* state) {
  if (o_.dir.empty() || g.rank() != 0) return std::string();
  if (state->step == state->checkpoint_step) return std::string();  // already on disk
  tensor::FlatStorage& storage = model_->storage();
  const int64_t n = storage.size();
  if (!OwnsAll(*g.sync, n)) {
    return absl::UnimplementedError(absl::StrCat(
        "strategy '", g.sync->name(), "' shards its state across ranks; its checkpoints need "
        "resharding checkpoints, which this build does not have: run without --checkpoint_dir"));
  }
  RETURN_IF_ERROR(MakeDirectories(o_.dir));
  const std::string path =
      absl::StrFormat("%s/step-%08d.tckpt", o_.dir, static_cast<long long>(state->step));
  v1::DataCursor dc;
  dc.set_epoch(state->cursor.epoch);
  dc.set_step_in_epoch(state->cursor.step_in_epoch);
  dc.set_samples_in_epoch(state->cursor.step_in_epoch * int64_t{o_.batch_size} * g.world());
  const std::string cursor_bytes = dc.SerializeAsString();
  checkpoint::CheckpointView v;
  v.model_fingerprint = o_.fingerprint;
  v.step = state->step;
  v.total_params = n;
  v.range_lo = 0;
  v.range_hi = n;
  const float* params = storage.params();
  RETURN_IF_ERROR(g.sync->SyncStateToHost());
  if (!backend_->host_accessible()) {
    ASSIGN_OR_RETURN(params, HostParams());
  }
  v.params = absl::MakeConstSpan(params, n);
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
  v.blobs.push_back({"data_cursor", cursor_bytes});
  v.blobs.push_back({"model_spec", o_.model_text});
  RETURN_IF_ERROR(checkpoint::WriteCheckpoint(path, v));
  v1::CheckpointRecord record;
  record.set_step(state->step);
  record.set_path(path);
  *record.mutable_cursor() = dc;
  record.set_world_size(g.world());
  record.set_unix_millis(absl::ToUnixMillis(absl::Now()));
  RETURN_IF_ERROR(client_->CommitCheckpoint(record));
  state->checkpoint_step = state->step;
  return path;
}

}  // namespace worker
}  // namespace tandem
