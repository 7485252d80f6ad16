// A fixed pool of worker threads running submitted closures in FIFO order;
// the data server's decode/pack pool, shared by all streams.
//
//   ThreadPool pool(4);
//   pool.Submit([&] { PackBatch(slot); });
//
// Thread-safe. The destructor finishes every queued task, then joins. Tasks
// must not throw (tandem code does not) and must not block on other tasks.
#ifndef TANDEM_SERVICES_DATASERVER_THREAD_POOL_H_
#define TANDEM_SERVICES_DATASERVER_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace dataserver {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // num_threads < 1 is treated as 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace dataserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_DATASERVER_THREAD_POOL_H_
