// CommExecutor: one communication thread that runs a strategy's
// collectives strictly in the order they were queued, so every rank issues
// the same sequence. The trainer or backward thread queues an operation and
// gets a ticket; Wait(ticket) blocks until that operation (and every one
// before it) has run. Op is a small value type (what to do: a bucket, a
// layer's gather); `run` does it, on the communication thread only.
//
//   CommExecutor<Op> exec(capacity, [this](const Op& op) { return Do(op); });
//   const int64_t t = exec.Enqueue(op);   // returns at once
//   RETURN_IF_ERROR(exec.Wait(t));        // op and everything before it ran
//   RETURN_IF_ERROR(exec.Drain());        // everything queued so far ran
//
// The first error is sticky: later operations are skipped (not run) and
// every Wait returns it; destroy the executor (and its strategy) to
// recover. Nothing is allocated after construction: the queue is a ring of
// `capacity` ops, and Enqueue waits while it is full (size it so it never
// is). The destructor stops the thread once the running operation returns;
// queued operations are dropped.
//
// Thread-safety: Enqueue, Wait, Drain and stats from any thread; `run` is
// called with no lock held, one call at a time.
#ifndef TANDEM_COMMON_SYNC_BUCKET_COMM_EXECUTOR_H_
#define TANDEM_COMMON_SYNC_BUCKET_COMM_EXECUTOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/timing/seconds_since.h"
#include "common/trace/recorder.h"

namespace tandem {
namespace sync {

// Cumulative.
struct CommExecutorStats {
  int64_t ran = 0;            // operations run (skipped ones not counted)
  double busy_seconds = 0;    // time inside `run`
  double wait_seconds = 0;    // time Wait / Drain blocked
};

template <typename Op>
class CommExecutor {
 public:
  using Run = std::function<absl::Status(const Op&)>;

  // capacity > 0. Starts the thread.
  CommExecutor(int64_t capacity, Run run)
      : run_(std::move(run)), ring_(capacity > 0 ? capacity : 1) {
    thread_ = std::thread([this] {
      trace::SetThreadName("comm");
      Loop();
    });
  }
  ~CommExecutor() {
    {
      absl::MutexLock lock(&mu_);
      shutdown_ = true;
    }
    thread_.join();
  }
  CommExecutor(const CommExecutor&) = delete;
  CommExecutor& operator=(const CommExecutor&) = delete;

  // Queues `op`; its ticket (0, 1, 2, ... in queue order).
  int64_t Enqueue(const Op& op) {
    absl::MutexLock lock(&mu_);
    const int64_t cap = static_cast<int64_t>(ring_.size());
    mu_.Await(absl::Condition(
        +[](CommExecutor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
          return e->issued_ - e->done_ < static_cast<int64_t>(e->ring_.size());
        },
        this));
    ring_[issued_ % cap] = op;
    return issued_++;
  }

  // Blocks until op `ticket` has run (or been skipped); the first error of
  // any operation so far, or OK.
  absl::Status Wait(int64_t ticket) {
    const auto start = std::chrono::steady_clock::now();
    absl::MutexLock lock(&mu_);
    auto done = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ > ticket; };
    mu_.Await(absl::Condition(&done));
    stats_.wait_seconds += SecondsSince(start);
    return error_;
  }
  // Wait for everything queued so far.
  absl::Status Drain() {
    int64_t last;
    {
      absl::MutexLock lock(&mu_);
      last = issued_ - 1;
    }
    return Wait(last);
  }

  CommExecutorStats stats() const {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  void Loop() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      mu_.Await(absl::Condition(
          +[](CommExecutor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
            return e->shutdown_ || e->done_ < e->issued_;
          },
          this));
      if (shutdown_) return;
      const Op op = ring_[done_ % static_cast<int64_t>(ring_.size())];
      if (error_.ok()) {  // after an error nothing more is issued
        mu_.Unlock();
        const auto start = std::chrono::steady_clock::now();
        absl::Status s = run_(op);
        const double seconds = SecondsSince(start);
        mu_.Lock();
        stats_.busy_seconds += seconds;
        ++stats_.ran;
        if (!s.ok()) error_ = std::move(s);
      }
      ++done_;
    }
  }

  const Run run_;
  mutable absl::Mutex mu_;
  std::vector<Op> ring_ ABSL_GUARDED_BY(mu_);
  int64_t issued_ ABSL_GUARDED_BY(mu_) = 0;  // tickets handed out
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;    // ops [0, done_) have run or been skipped
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the first error
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  CommExecutorStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_BUCKET_COMM_EXECUTOR_H_
