#include "services/shardserver/replicator.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace shardserver {

Replicator::Replicator(RangeStore* store, ReplicatorOptions options)
    : store_(store), options_(std::move(options)), thread_([this] { Loop(); }) {}

Replicator::~Replicator() { Stop(); }

void Replicator::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void Replicator::Applied(int64_t generation, int chunk, int64_t) {
  absl::MutexLock lock(&mu_);
  if (stop_ || generation < generation_ || chunk < 0) return;
  if (generation > generation_) {
    // A new generation: what the old one still had queued is moot.
    generation_ = generation;
    queue_.clear();
    head_ = 0;
    queued_.clear();
  }
  if (static_cast<size_t>(chunk) >= queued_.size()) queued_.resize(chunk + 1, 0);
  if (queued_[chunk]) return;  // sent at its newest step when its turn comes
  queued_[chunk] = 1;
  queue_.push_back(chunk);
  cv_.Signal();
}

int64_t Replicator::bytes_sent() const {
  absl::MutexLock lock(&mu_);
  return bytes_sent_;
}

int64_t Replicator::gradients_sent() const {
  absl::MutexLock lock(&mu_);
  return gradients_sent_;
}

int64_t Replicator::states_sent() const {
  absl::MutexLock lock(&mu_);
  return states_sent_;
}

void Replicator::Loop() {
  for (;;) {
    int64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && head_ == queue_.size()) cv_.Wait(&mu_);
      if (stop_) return;
    }
    // Read without mu_ (the store calls Applied under its own lock).
    const int64_t per_chunk = std::max<int64_t>(1, store_->chunk_bytes());
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      generation = generation_;
      // Every chunk queued so far, up to about kBatchBytes (the chunks of a
      // generation share a size but for the last).
      batch_.clear();
      while (head_ < queue_.size() &&
             static_cast<int64_t>(batch_.size()) * per_chunk < kBatchBytes) {
        const int chunk = queue_[head_++];
        queued_[chunk] = 0;
        batch_.push_back(chunk);
      }
      if (head_ == queue_.size()) {  // drained: reuse the vector's storage
        queue_.clear();
        head_ = 0;
      }
    }
    SendBatch(generation);
  }
}

namespace {

int64_t PayloadBytes(const v1::ReplicaChunk& m) {
  int64_t b = static_cast<int64_t>(m.grad().data().size() + m.params().data().size());
  for (const v1::Tensor& t : m.state()) b += static_cast<int64_t>(t.data().size());
  return b;
}

}  // namespace

void Replicator::SendBatch(int64_t generation) {
  if (batch_.empty()) return;  // a new generation dropped the queue meanwhile
  if (msgs_.size() < batch_.size()) msgs_.resize(batch_.size());
  steps_.resize(batch_.size());
  all_.clear();
  std::string address;
  for (size_t i = 0; i < batch_.size(); ++i) {
    absl::StatusOr<int64_t> step =
        store_->ReadChunkForReplica(generation, batch_[i], /*full=*/false, &msgs_[i], &address);
    if (!step.ok()) return;  // the generation is over
    steps_[i] = *step;
    all_.push_back(static_cast<int>(i));
  }
  // This generation may already go on without a replica of the range: a
  // replica that hangs must not hold every chunk for a timeout.
  absl::Status s = failed_generation_ == generation ? absl::OkStatus() : Call(address, all_);
  if (failed_generation_ != generation && s.ok()) {
    resend_.clear();
    for (int i : all_) {
      if (acks_.acks(i).needs_state()) resend_.push_back(i);
    }
    for (int i : resend_) {
      absl::StatusOr<int64_t> step =
          store_->ReadChunkForReplica(generation, batch_[i], /*full=*/true, &msgs_[i], &address);
      if (!step.ok()) return;
      steps_[i] = *step;
    }
    if (!resend_.empty()) s = Call(address, resend_);
    for (size_t k = 0; s.ok() && k < resend_.size(); ++k) {
      if (acks_.acks(static_cast<int>(k)).needs_state()) {
        s = absl::InternalError("the replica still asks for the state it was just sent");
      }
    }
  }
  if (!s.ok() && failed_generation_ != generation) {
    failed_generation_ = generation;
    LOG(WARNING) << "shard server: range replication to " << address << " failed (" << s
                 << "); generation " << generation
                 << " goes on without a replica of this range (a lost server then recovers "
                    "from the disk checkpoint)";
  }
  // The chunks' next steps go ahead either way (see the header).
  for (size_t i = 0; i < batch_.size(); ++i) {
    store_->MarkReplicated(generation, batch_[i], steps_[i], &msgs_[i]);
  }
}

absl::Status Replicator::Call(const std::string& address, const std::vector<int>& which) {
  if (address != address_ || stub_ == nullptr) {
    ChannelOptions co;
    co.target = address;
    co.auth_token = options_.auth_token;
    stub_ = v1::ShardServer::NewStub(MakeChannel(co));
    address_ = address;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.timeout));
  acks_.Clear();
  std::unique_ptr<grpc::ClientWriter<v1::ReplicaChunk>> writer =
      stub_->ReplicateStream(&ctx, &acks_);
  int64_t bytes = 0, gradients = 0;
  for (int i : which) {
    if (!writer->Write(msgs_[i])) break;  // the call failed: Finish says why
    bytes += PayloadBytes(msgs_[i]);
    gradients += msgs_[i].grad().data().empty() ? 0 : 1;
  }
  writer->WritesDone();
  RETURN_IF_ERROR(FromGrpcStatus(writer->Finish(), "ReplicateStream to " + address));
  if (acks_.acks_size() != static_cast<int>(which.size())) {
    return absl::InternalError(absl::StrCat("ReplicateStream to ", address, ": ",
                                            acks_.acks_size(), " acknowledgements for ",
                                            which.size(), " chunks"));
  }
  absl::MutexLock lock(&mu_);
  bytes_sent_ += bytes;
  gradients_sent_ += gradients;
  states_sent_ += static_cast<int64_t>(which.size()) - gradients;
  return absl::OkStatus();
}

}  // namespace shardserver
}  // namespace tandem
