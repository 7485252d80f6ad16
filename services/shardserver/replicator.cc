#include "services/shardserver/replicator.h"

#include <chrono>
#include <utility>

#include "common/log/log.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"

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

void Replicator::Loop() {
  for (;;) {
    int64_t generation = 0;
    int chunk = 0;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && head_ == queue_.size()) cv_.Wait(&mu_);
      if (stop_) return;
      generation = generation_;
      chunk = queue_[head_++];
      queued_[chunk] = 0;
      if (head_ == queue_.size()) {  // drained: reuse the vector's storage
        queue_.clear();
        head_ = 0;
      }
    }
    Send(generation, chunk);
  }
}

void Replicator::Send(int64_t generation, int chunk) {
  std::string address;
  absl::StatusOr<int64_t> step = store_->ReadChunkForReplica(generation, chunk, &msg_, &address);
  if (!step.ok()) return;  // the generation is over
  if (failed_generation_ == generation) {
    // This generation already goes on without a replica of the range: a
    // replica that hangs must not hold every chunk for a timeout.
    store_->MarkReplicated(generation, chunk, *step, &msg_);
    return;
  }
  if (address != address_ || stub_ == nullptr) {
    ChannelOptions co;
    co.target = address;
    co.auth_token = options_.auth_token;
    stub_ = v1::ShardServer::NewStub(MakeChannel(co));
    address_ = address;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.timeout));
  v1::ReplicaAck ack;
  const absl::Status s =
      FromGrpcStatus(stub_->Replicate(&ctx, msg_, &ack), "Replicate to " + address);
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    bytes_sent_ += static_cast<int64_t>(msg_.params().data().size()) *
                   static_cast<int64_t>(1 + msg_.state_size());
  } else if (failed_generation_ != generation) {
    failed_generation_ = generation;
    LOG(WARNING) << "shard server: range replication to " << address << " failed (" << s
                 << "); generation " << generation
                 << " goes on without a replica of this range (a lost server then recovers "
                    "from the disk checkpoint)";
  }
  // The chunk's next step goes ahead either way (see the header).
  store_->MarkReplicated(generation, chunk, *step, &msg_);
}

}  // namespace shardserver
}  // namespace tandem
