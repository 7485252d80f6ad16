#include "services/shardserver/apply_queue.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tandem {
namespace shardserver {
namespace {

// No threads: the job runs before Enqueue returns, on the caller's thread.
TEST(ApplyQueue, WithoutThreadsRunsOnTheCaller) {
  std::vector<int64_t> ran;
  std::thread::id where;
  ApplyQueue q(0, [&](const ApplyJob& j) {
    ran.push_back(j.step);
    where = std::this_thread::get_id();
  });
  q.Enqueue({nullptr, 3, 7});
  EXPECT_EQ(ran, std::vector<int64_t>{7});
  EXPECT_EQ(where, std::this_thread::get_id());
}

// One thread: FIFO order; more jobs than the ring's first capacity while
// the thread is held (it grows); everything queued runs before the
// destructor returns; Enqueue returns while the job is still blocked.
TEST(ApplyQueue, RunsEveryJobInOrderOffTheCallersThread) {
  absl::Notification release;
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    ApplyQueue q(1, [&](const ApplyJob& j) {
      if (j.chunk == 0) release.WaitForNotification();
      absl::MutexLock lock(&mu);
      order.push_back(j.chunk);
      threads.push_back(std::this_thread::get_id());
    });
    for (int c = 0; c < 200; ++c) q.Enqueue({std::make_shared<int>(c), c, 1});
    {
      absl::MutexLock lock(&mu);
      EXPECT_TRUE(order.empty()) << "the first job is held: nothing may have run";
    }
    release.Notify();
  }
  ASSERT_EQ(order.size(), 200u);
  for (int c = 0; c < 200; ++c) EXPECT_EQ(order[c], c);
  for (const auto& t : threads) EXPECT_NE(t, std::this_thread::get_id());
}

// Several threads: every job runs exactly once; the state each job carries
// stays alive until it ran.
TEST(ApplyQueue, SeveralThreadsRunEachJobOnce) {
  absl::Mutex mu;
  std::vector<int> count(100, 0);
  {
    ApplyQueue q(3, [&](const ApplyJob& j) {
      const int v = *static_cast<int*>(j.state.get());
      absl::MutexLock lock(&mu);
      ++count[v];
    });
    for (int c = 0; c < 100; ++c) q.Enqueue({std::make_shared<int>(c), c, 1});
  }
  for (int c = 0; c < 100; ++c) EXPECT_EQ(count[c], 1) << c;
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem
