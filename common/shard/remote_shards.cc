#include "common/shard/remote_shards.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/trace/trace.h"

namespace tandem {
namespace shard {

struct RemoteShards::Lane {
  explicit Lane(const LaneQueueOptions& o) : queue(o) {}

  int server = 0;
  ShardClient* client = nullptr;
  std::unique_ptr<PushStream> stream;
  std::vector<int> written;  // chunks sent on this step's stream (reserved once)
  LaneQueue queue;
  CallCanceller cancel;      // pull lanes: ends a pull waiting on its server
  std::thread thread;
};

namespace {

bool Retryable(const absl::Status& s) { return s.code() == absl::StatusCode::kUnavailable; }

}  // namespace

RemoteShards::RemoteShards(const RemoteShardsOptions& options, ShardLayout layout)
    : options_(options), layout_(std::move(layout)), gate_(layout_.num_chunks()) {}

absl::StatusOr<std::unique_ptr<RemoteShards>> RemoteShards::Create(const RemoteShardsOptions& o) {
  if (o.addresses.empty()) {
    return absl::InvalidArgumentError(
        "shard servers: no addresses (give --shard_servers host:port,... or start them with "
        "tandem local --shard_servers N)");
  }
  if (o.streams_per_server < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard servers: streams_per_server must be >= 1, got ", o.streams_per_server));
  }
  if (o.pull_streams_per_server < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard servers: pull_streams_per_server must be >= 0, got ", o.pull_streams_per_server));
  }
  if (o.push_stride < 1 || o.push_offset < 0 || o.push_offset >= o.push_stride) {
    return absl::InvalidArgumentError(absl::StrCat("shard servers: push_offset ", o.push_offset,
                                                   " must be in [0, push_stride ", o.push_stride,
                                                   ")"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard servers: rank ", o.rank, " outside world ", o.world_size));
  }
  ASSIGN_OR_RETURN(ShardLayout layout,
                   ShardLayout::Create(o.size, static_cast<int>(o.addresses.size()),
                                       o.chunk_elements));
  std::unique_ptr<RemoteShards> r(new RemoteShards(o, std::move(layout)));
  for (const std::string& a : o.addresses) {
    ASSIGN_OR_RETURN(std::unique_ptr<ShardClient> c,
                     ShardClient::Create({a, o.job_id, o.timeout}));
    r->clients_.push_back(std::move(c));
  }
  const int servers = r->layout_.servers();
  for (auto* lanes : {&r->lanes_, &r->pull_lanes_}) {
    const bool push = lanes == &r->lanes_;
    const int per_server = push ? o.streams_per_server : r->pull_lanes_per_server();
    for (int s = 0; s < servers; ++s) {
      const int chunks = r->layout_.end_chunk(s) - r->layout_.first_chunk(s);
      for (int k = 0; k < per_server; ++k) {
        const int mine = chunks / per_server + 1;
        // Capacity: every chunk of the lane twice (push + pull) plus a
        // close (pull lanes: any of the server's chunks may map to one).
        // Push lanes send this rank's chunks in ascending order.
        LaneQueueOptions qo{static_cast<size_t>(2 * (push ? mine : chunks) + 2), push, {}};
        if (qo.lowest_chunk_first) qo.push_order = r->PushOrder(s, k);
        auto lane = std::make_unique<Lane>(qo);
        lane->server = s;
        lane->client = r->clients_[s].get();
        lane->stream = lane->client->NewPushStream();
        lane->written.reserve(mine);
        lanes->push_back(std::move(lane));
      }
    }
  }
  {
    absl::MutexLock lock(&r->mu_);
    r->pulled_.assign(r->layout_.num_chunks(), 0);
  }
  for (auto* lanes : {&r->lanes_, &r->pull_lanes_}) {
    for (auto& lane : *lanes) {
      Lane* l = lane.get();
      RemoteShards* self = r.get();
      l->thread = std::thread([self, l] { self->RunLane(l); });
    }
  }
  return r;
}

RemoteShards::~RemoteShards() {
  // A pull may wait on a step that will never be applied (the step was
  // abandoned): end it rather than wait for its timeout.
  for (auto& l : pull_lanes_) l->cancel.Cancel();
  for (auto* lanes : {&lanes_, &pull_lanes_}) {
    for (auto& l : *lanes) l->queue.Stop();
  }
  for (auto* lanes : {&lanes_, &pull_lanes_}) {
    for (auto& l : *lanes) {
      if (l->thread.joinable()) l->thread.join();
      l->stream->Cancel();
    }
  }
}

std::vector<int> RemoteShards::PushOrder(int server, int k) const {
  std::vector<int> out;
  const int stride = options_.push_stride;
  for (int c = layout_.first_chunk(server); c < layout_.end_chunk(server); ++c) {
    if ((c - layout_.first_chunk(server)) % options_.streams_per_server == k &&
        c % stride == options_.push_offset) {
      out.push_back(c);
    }
  }
  return out;
}

RemoteShards::Lane& RemoteShards::LaneOf(int chunk, bool pull) {
  const int s = layout_.chunk(chunk).server;
  const int at = chunk - layout_.first_chunk(s);
  // Pulls: this rank's successive chunks (push_stride apart) alternate
  // over the pull lanes, so the next pull is asked for while one answer is
  // still coming in.
  const int per_server = pull ? pull_lanes_per_server() : options_.streams_per_server;
  const int k = (pull ? at / options_.push_stride : at) % per_server;
  return *(pull ? pull_lanes_ : lanes_)[s * per_server + k];
}

absl::Status RemoteShards::FirstError() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

absl::Status RemoteShards::InitServers(
    int64_t step, const v1::OptimizerConfig& optimizer, const float* params,
    const std::vector<std::pair<std::string, const float*>>& state) {
  std::vector<absl::Status> results(clients_.size());
  std::vector<std::thread> threads;
  for (size_t s = 0; s < clients_.size(); ++s) {
    threads.emplace_back([&, s] {
      ShardInit init;
      init.generation = options_.generation;
      init.step = step;
      init.range = layout_.server_range(static_cast<int>(s));
      init.chunk_elements = options_.chunk_elements;
      init.world_size = options_.world_size;
      init.optimizer = optimizer;
      init.apply_per_chunk = options_.apply_per_chunk;
      init.pull_int8_chunk = options_.pull_int8_chunk;
      if (replicated()) init.replica_address = options_.addresses[(s + 1) % clients_.size()];
      results[s] = clients_[s]->Init(init, params, state).status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

bool RemoteShards::replicated() const {
  return options_.replicate && clients_.size() >= 2 && options_.pull_int8_chunk == 0;
}

absl::StatusOr<std::vector<int>> RemoteShards::RecoverState(
    int64_t step, float* params, const std::vector<std::pair<std::string, float*>>& state) {
  const int servers = static_cast<int>(clients_.size());
  std::vector<absl::Status> results(servers);
  std::vector<char> from_replica(servers, 0);
  // One range from one server: the parameters, then every state buffer.
  auto read = [&](int s, int holder, v1::RecoverySource source) {
    const optim::ParamRange r = layout_.server_range(s);
    absl::Status st = clients_[holder]->ReadRecovery(source, step, r.lo, r.hi, "", params);
    for (size_t i = 0; st.ok() && i < state.size(); ++i) {
      st = clients_[holder]->ReadRecovery(source, step, r.lo, r.hi, state[i].first,
                                          state[i].second);
    }
    return st;
  };
  std::vector<std::thread> threads;
  for (int s = 0; s < servers; ++s) {
    if (layout_.server_range(s).size() == 0) continue;
    threads.emplace_back([&, s] {
      absl::Status own = read(s, s, v1::RECOVERY_OWN);
      if (own.ok() || servers < 2) {
        results[s] = own;
        return;
      }
      absl::Status replica = read(s, (s + 1) % servers, v1::RECOVERY_REPLICA);
      from_replica[s] = replica.ok();
      results[s] = replica.ok() ? replica
                                : absl::FailedPreconditionError(absl::StrCat(
                                      "step ", step, " of shard server ", s, "'s range: ",
                                      own.message(), "; its replica: ", replica.message()));
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& r : results) RETURN_IF_ERROR(r);
  std::vector<int> out;
  for (int s = 0; s < servers; ++s) {
    if (from_replica[s]) out.push_back(s);
  }
  return out;
}

absl::Status RemoteShards::PullState(int64_t step, const std::string& name, float* out) {
  std::vector<absl::Status> results(clients_.size());
  std::vector<std::thread> threads;
  for (size_t s = 0; s < clients_.size(); ++s) {
    threads.emplace_back([&, s] {
      const optim::ParamRange r = layout_.server_range(static_cast<int>(s));
      results[s] = clients_[s]->Pull(options_.generation, step, r.lo, r.hi, out, name);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

namespace {

// SaveShard on every server that owns elements, in parallel; `blobs` go to
// the server whose range starts at 0.
absl::StatusOr<std::vector<optim::ParamRange>> SaveOnEach(
    const std::vector<ShardClient*>& clients, const std::vector<optim::ParamRange>& ranges,
    int64_t generation, int64_t total, int64_t step, uint64_t model_fingerprint,
    const std::vector<std::string>& paths,
    const std::vector<std::pair<std::string, std::string>>& blobs, v1::SaveMode mode) {
  const int servers = static_cast<int>(clients.size());
  if (static_cast<int>(paths.size()) != servers) {
    return absl::InvalidArgumentError(absl::StrCat("SaveShards: ", paths.size(), " paths for ",
                                                   servers, " shard servers"));
  }
  std::vector<absl::Status> results(servers);
  std::vector<std::thread> threads;
  for (int s = 0; s < servers; ++s) {
    if (ranges[s].size() == 0) continue;
    threads.emplace_back([&, s] {
      v1::SaveShardRequest r;
      r.set_step(step);
      r.set_path(paths[s]);
      r.set_generation(generation);
      r.set_model_fingerprint(model_fingerprint);
      r.set_total_params(total);
      r.set_mode(mode);
      if (ranges[s].lo == 0) {
        for (const auto& [name, data] : blobs) {
          v1::SaveShardBlob* b = r.add_blobs();
          b->set_name(name);
          b->set_data(data);
        }
      }
      results[s] = clients[s]->Save(std::move(r)).status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) RETURN_IF_ERROR(s);
  return ranges;
}

}  // namespace

absl::StatusOr<std::vector<optim::ParamRange>> RemoteShards::SaveShards(
    int64_t step, uint64_t model_fingerprint, const std::vector<std::string>& paths,
    const std::vector<std::pair<std::string, std::string>>& blobs, v1::SaveMode mode) {
  std::vector<ShardClient*> clients;
  std::vector<optim::ParamRange> ranges;
  for (size_t s = 0; s < clients_.size(); ++s) {
    clients.push_back(clients_[s].get());
    ranges.push_back(layout_.server_range(static_cast<int>(s)));
  }
  return SaveOnEach(clients, ranges, options_.generation, options_.size, step, model_fingerprint,
                    paths, blobs, mode);
}

RemoteShards::SnapshotWrite RemoteShards::SnapshotWriter() const {
  std::vector<optim::ParamRange> ranges;
  for (int s = 0; s < layout_.servers(); ++s) ranges.push_back(layout_.server_range(s));
  const RemoteShardsOptions o = options_;
  return [o, ranges](int64_t step, uint64_t fingerprint, const std::vector<std::string>& paths,
                     const std::vector<std::pair<std::string, std::string>>& blobs)
             -> absl::StatusOr<std::vector<optim::ParamRange>> {
    std::vector<std::unique_ptr<ShardClient>> owned;
    std::vector<ShardClient*> clients;
    for (const std::string& a : o.addresses) {
      ASSIGN_OR_RETURN(owned.emplace_back(), ShardClient::Create({a, o.job_id, o.timeout}));
      clients.push_back(owned.back().get());
    }
    return SaveOnEach(clients, ranges, o.generation, o.size, step, fingerprint, paths, blobs,
                      v1::SAVE_FROM_SNAPSHOT);
  };
}

absl::Status RemoteShards::BeginPushes(const PushHeader& header) {
  RETURN_IF_ERROR(FirstError());
  header_ = header;
  absl::MutexLock lock(&mu_);
  gate_.Reset();
  return absl::OkStatus();
}

void RemoteShards::Push(int chunk, const void* data) {
  LaneJob j;
  j.kind = LaneJob::kPush;
  j.chunk = chunk;
  j.data = data;
  {
    absl::MutexLock lock(&mu_);
    gate_.PushQueued(chunk);
  }
  LaneOf(chunk).queue.Enqueue(j);
}

void RemoteShards::ClosePushes() {
  {
    absl::MutexLock lock(&mu_);
    closes_pending_ = static_cast<int>(lanes_.size());
  }
  LaneJob close;
  close.kind = LaneJob::kClose;
  for (auto& l : lanes_) l->queue.Enqueue(close);
}

absl::Status RemoteShards::WaitPushes() {
  absl::MutexLock lock(&mu_);
  while (closes_pending_ > 0) cv_.Wait(&mu_);
  return error_;
}

void RemoteShards::Pull(int chunk, int64_t step, float* params, bool reset_delta_reference) {
  EnqueuePull(chunk, step, params, nullptr, reset_delta_reference);
}

void RemoteShards::PullDelta(int chunk, int64_t step, uint8_t* block) {
  EnqueuePull(chunk, step, nullptr, block, false);
}

void RemoteShards::EnqueuePull(int chunk, int64_t step, float* params, uint8_t* block,
                               bool reset) {
  LaneJob j;
  j.kind = LaneJob::kPull;
  j.chunk = chunk;
  j.step = step;
  j.params = params;
  j.block = block;
  j.reset = reset;
  {
    absl::MutexLock lock(&mu_);
    pulled_[chunk] = 0;
    ++pulls_pending_;
    // Behind a push not yet written: RunPush (or a dropped push) sends it.
    if (!gate_.Admit(j)) return;
  }
  LaneOf(chunk, /*pull=*/true).queue.Enqueue(j);
}

absl::Status RemoteShards::WaitPulled(int chunk) {
  absl::MutexLock lock(&mu_);
  while (!pulled_[chunk] && error_.ok()) cv_.Wait(&mu_);
  return error_;
}

absl::Status RemoteShards::WaitAllPulls() {
  absl::MutexLock lock(&mu_);
  while (pulls_pending_ > 0) cv_.Wait(&mu_);
  return error_;
}

RemoteStats RemoteShards::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void RemoteShards::RunLane(Lane* l) {
  // Pointers to each chunk's data for this step's pushes (resent on retry).
  std::vector<const void*> data(layout_.num_chunks(), nullptr);
  for (;;) {
    LaneJob j;
    if (!l->queue.Next(&j)) return;
    const bool failed = !FirstError().ok();
    switch (j.kind) {
      case LaneJob::kPush:
        if (!failed) RunPush(l, j, data);
        ReleasePull(j.chunk);
        break;
      case LaneJob::kClose:
        RunClose(l, failed, data);
        break;
      case LaneJob::kPull:
        RunPull(l, j, failed);
        break;
    }
  }
}

void RemoteShards::ReleasePull(int chunk) {
  LaneJob pull;
  {
    absl::MutexLock lock(&mu_);
    if (!gate_.PushWritten(chunk, &pull)) return;
  }
  LaneOf(chunk, /*pull=*/true).queue.Enqueue(pull);
}

absl::Status RemoteShards::ReopenStream(Lane* l, const std::vector<const void*>& data) {
  absl::Status s = l->stream->Open(header_);
  // A reopened stream resends what the broken one carried.
  for (size_t i = 0; s.ok() && i < l->written.size(); ++i) {
    s = l->stream->Write(layout_.chunk(l->written[i]), data[l->written[i]]);
  }
  return s;
}

void RemoteShards::RunPush(Lane* l, const LaneJob& j, std::vector<const void*>& data) {
  data[j.chunk] = j.data;
  const Chunk& c = layout_.chunk(j.chunk);
  trace::Span span("push", "remote", PushPayloadBytes(header_, c.size()), j.chunk);
  absl::Status s;
  for (int attempt = 1;; ++attempt) {
    if (!l->stream->open()) s = ReopenStream(l, data);
    if (s.ok()) s = l->stream->Write(c, j.data);
    if (s.ok() || !Retryable(s) || attempt >= options_.push_attempts) break;
    l->stream->Cancel();
  }
  if (s.ok()) l->written.push_back(j.chunk);
  absl::MutexLock lock(&mu_);
  if (s.ok()) {
    stats_.pushed_bytes += PushPayloadBytes(header_, c.size());
  } else if (error_.ok()) {
    error_ = s;
  }
  cv_.SignalAll();
}

void RemoteShards::RunClose(Lane* l, bool failed, const std::vector<const void*>& data) {
  absl::Status s;
  int64_t dups = 0;
  if (!failed && l->stream->open()) {
    // A failed Finish, or a reopen whose resend failed, leaves the stream
    // closed: each retry reopens it (resending what it carried) first.
    for (int attempt = 1;; ++attempt) {
      if (!l->stream->open()) s = ReopenStream(l, data);
      if (s.ok()) {
        absl::StatusOr<v1::PushGradientsResponse> r = l->stream->Finish();
        s = r.status();
        if (r.ok()) dups = r->duplicates();
      }
      if (s.ok() || !Retryable(s) || attempt >= options_.push_attempts) break;
    }
  }
  if (l->stream->open()) l->stream->Cancel();
  l->written.clear();
  absl::MutexLock lock(&mu_);
  if (!s.ok() && error_.ok()) error_ = s;
  stats_.duplicates += dups;
  --closes_pending_;
  cv_.SignalAll();
}

void RemoteShards::RunPull(Lane* l, const LaneJob& j, bool failed) {
  const Chunk& c = layout_.chunk(j.chunk);
  const int64_t bytes = j.block != nullptr ? Int8BlockBytes(c.size(), options_.pull_int8_chunk)
                                           : c.size() * int64_t{sizeof(float)};
  trace::Span span("pull", "remote", bytes, j.chunk);
  absl::Status s;
  if (!failed && j.block != nullptr) {
    s = l->client->PullDelta(options_.generation, j.step, c.lo, c.hi, j.block, bytes,
                             &l->cancel);
  } else if (!failed) {
    s = l->client->Pull(options_.generation, j.step, c.lo, c.hi, j.params, "", j.reset,
                        &l->cancel);
  }
  absl::MutexLock lock(&mu_);
  if (s.ok() && !failed) {
    pulled_[j.chunk] = 1;
    stats_.pulled_bytes += bytes;
  } else if (error_.ok() && !s.ok()) {
    error_ = s;
  }
  --pulls_pending_;
  cv_.SignalAll();
}

}  // namespace shard
}  // namespace tandem
