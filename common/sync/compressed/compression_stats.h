// CompressionStats: the counters behind stats() that `compressed` and its
// powersgd variant keep alike — bytes handed to collectives (and of those,
// across nodes), bytes before / after compression, buckets sent
// uncompressed, steps, optimizer seconds and the residual norm.
//
//   stats_.Sent(bytes);                       // communication thread
//   stats_.Compressed(fp32_bytes, encoded);
//   stats_.StepFinished(seconds, ok, norm);   // trainer thread
//   SyncStats s = stats_.Get(engine_->stats());
//
// Thread-safe: the byte counters are atomics, the step fields under a mutex.
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSION_STATS_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSION_STATS_H_

#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "common/sync/bucket/bucket_engine.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

class CompressionStats {
 public:
  // world_spans_nodes: collectives over the world cross nodes.
  explicit CompressionStats(bool world_spans_nodes) : world_spans_nodes_(world_spans_nodes) {}

  // across_nodes: over a group that spans nodes (the world's, or inter).
  void Sent(int64_t bytes, bool across_nodes = true) {
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    if (world_spans_nodes_ && across_nodes) {
      inter_node_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    }
  }
  void Compressed(int64_t before, int64_t after) {
    bytes_before_.fetch_add(before, std::memory_order_relaxed);
    bytes_after_.fetch_add(after, std::memory_order_relaxed);
  }
  void Uncompressed() { uncompressed_buckets_.fetch_add(1, std::memory_order_relaxed); }

  // FinishStep: the seconds it spent; `counted` when the step succeeded;
  // residual_norm >= 0 replaces the gauge (negative leaves it).
  void StepFinished(double seconds, bool counted, double residual_norm) {
    absl::MutexLock lock(&mu_);
    optimizer_seconds_ += seconds;
    if (!counted) return;
    ++steps_;
    if (residual_norm >= 0) residual_norm_ = residual_norm;
  }

  SyncStats Get(const BucketEngineStats& e) const {
    SyncStats s;
    s.buckets = e.buckets;
    s.comm_seconds = e.busy_seconds;
    s.exposed_wait_seconds = e.exposed_wait_seconds;
    s.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
    s.inter_node_bytes = inter_node_bytes_.load(std::memory_order_relaxed);
    s.compress_bytes_before = bytes_before_.load(std::memory_order_relaxed);
    s.compress_bytes_after = bytes_after_.load(std::memory_order_relaxed);
    s.uncompressed_buckets = uncompressed_buckets_.load(std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.optimizer_seconds = optimizer_seconds_;
    s.residual_norm = residual_norm_;
    return s;
  }

 private:
  const bool world_spans_nodes_;
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> inter_node_bytes_{0};
  std::atomic<int64_t> bytes_before_{0};
  std::atomic<int64_t> bytes_after_{0};
  std::atomic<int64_t> uncompressed_buckets_{0};
  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  double optimizer_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double residual_norm_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSION_STATS_H_
