// ApplyQueue: the shard server's apply threads. A push that completes a
// chunk (every rank's contribution summed) hands the optimizer step to this
// queue and returns, so the stream it came on goes on reading the next
// chunks while the step runs (BytePS's engine threads: the receive path
// only sums, the optimizer runs elsewhere).
//
//   ApplyQueue q(2, [this](const ApplyJob& j) { Apply(j); });
//   q.Enqueue({state, chunk, step});   // from a gRPC thread
//   // ~ApplyQueue runs what is queued, then joins the threads
//
// Jobs run in FIFO order on any of the threads (two jobs may run at once:
// the callback locks what it touches). The ring grows only when more jobs
// are queued than ever before (at most one per chunk per step), so a steady
// step allocates nothing. Thread-safe. With 0 threads Enqueue runs the job
// on the caller's thread (tools and tests that step a store by hand).
#ifndef TANDEM_SERVICES_SHARDSERVER_APPLY_QUEUE_H_
#define TANDEM_SERVICES_SHARDSERVER_APPLY_QUEUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace shardserver {

// One optimizer step to run: chunk `chunk` (or, with chunk < 0, the whole
// step) of `state` (opaque to the queue; kept alive while queued).
struct ApplyJob {
  std::shared_ptr<void> state;
  int chunk = -1;
  int64_t step = 0;
};

class ApplyQueue {
 public:
  ApplyQueue(int threads, std::function<void(const ApplyJob&)> run);
  ~ApplyQueue();
  ApplyQueue(const ApplyQueue&) = delete;
  ApplyQueue& operator=(const ApplyQueue&) = delete;

  void Enqueue(ApplyJob job);

 private:
  void Loop();

  const std::function<void(const ApplyJob&)> run_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<ApplyJob> ring_ ABSL_GUARDED_BY(mu_);
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_APPLY_QUEUE_H_
