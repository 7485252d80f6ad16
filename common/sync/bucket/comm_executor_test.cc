// CommExecutor: operations run one at a time in queue order on its thread,
// Wait returns once its ticket ran, the first error is sticky and the
// operations after it are skipped, a full ring makes Enqueue wait instead of
// overwriting, stats add up.
#include "common/sync/bucket/comm_executor.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

// Records each op and the thread it ran on; fails the op equal to `fail`.
class Recorder {
 public:
  explicit Recorder(int fail = -1) : fail_(fail) {}
  absl::Status Run(int op) {
    absl::MutexLock lock(&mu_);
    ops_.push_back(op);
    threads_.push_back(std::this_thread::get_id());
    if (op == fail_) return absl::UnavailableError("peer 1 went away");
    return absl::OkStatus();
  }
  std::vector<int> ops() {
    absl::MutexLock lock(&mu_);
    return ops_;
  }
  std::vector<std::thread::id> threads() {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  const int fail_;
  absl::Mutex mu_;
  std::vector<int> ops_;
  std::vector<std::thread::id> threads_;
};

TEST(CommExecutorTest, RunsInQueueOrderOnItsOwnThreadAndWaitMeansDone) {
  Recorder rec;
  CommExecutor<int> exec(8, [&](const int& op) { return rec.Run(op); });
  std::vector<int64_t> tickets;
  for (int op : {5, 3, 9, 1}) tickets.push_back(exec.Enqueue(op));
  EXPECT_EQ(tickets, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_TRUE(exec.Wait(tickets[1]).ok());
  // Ticket 1 and everything before it have run.
  std::vector<int> ran = rec.ops();
  ASSERT_GE(ran.size(), 2u);
  EXPECT_EQ(ran[0], 5);
  EXPECT_EQ(ran[1], 3);
  ASSERT_TRUE(exec.Drain().ok());
  EXPECT_EQ(rec.ops(), (std::vector<int>{5, 3, 9, 1}));
  for (std::thread::id t : rec.threads()) {
    EXPECT_NE(t, std::this_thread::get_id());
    EXPECT_EQ(t, rec.threads()[0]);
  }
  EXPECT_EQ(exec.stats().ran, 4);
}

TEST(CommExecutorTest, DrainWithNothingQueuedReturnsAtOnce) {
  CommExecutor<int> exec(4, [](const int&) { return absl::OkStatus(); });
  EXPECT_TRUE(exec.Drain().ok());
  EXPECT_EQ(exec.stats().ran, 0);
}

TEST(CommExecutorTest, TheFirstErrorIsStickyAndLaterOpsAreSkipped) {
  Recorder rec(/*fail=*/2);
  CommExecutor<int> exec(8, [&](const int& op) { return rec.Run(op); });
  for (int op = 1; op <= 4; ++op) exec.Enqueue(op);
  const absl::Status s = exec.Drain();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "peer 1 went away");
  EXPECT_EQ(rec.ops(), (std::vector<int>{1, 2}));  // 3 and 4 skipped
  // Later ops are skipped too, and every Wait reports the error.
  const int64_t t = exec.Enqueue(5);
  EXPECT_EQ(exec.Wait(t).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(exec.Wait(0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rec.ops(), (std::vector<int>{1, 2}));
  EXPECT_EQ(exec.stats().ran, 2);
}

TEST(CommExecutorTest, AFullRingMakesEnqueueWaitInsteadOfOverwriting) {
  // The first op holds the thread until released, so the ring of 2 fills.
  absl::Notification release;
  Recorder rec;
  CommExecutor<int> exec(2, [&](const int& op) {
    if (op == 0) release.WaitForNotification();
    return rec.Run(op);
  });
  std::thread producer([&] {
    for (int op = 0; op < 20; ++op) exec.Enqueue(op);
  });
  release.Notify();
  producer.join();
  ASSERT_TRUE(exec.Drain().ok());
  std::vector<int> expected;
  for (int op = 0; op < 20; ++op) expected.push_back(op);
  EXPECT_EQ(rec.ops(), expected);
  EXPECT_EQ(exec.stats().ran, 20);
  EXPECT_GE(exec.stats().busy_seconds, 0.0);
}

}  // namespace
}  // namespace sync
}  // namespace tandem
