#include "services/dataserver/thread_pool.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace tandem {
namespace dataserver {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskOnPoolThreads) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.num_threads(), 3);
  absl::BlockingCounter done(100);
  absl::Mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> sum{0};
  for (int i = 0; i < 100; ++i) {
    pool.Submit([&, i] {
      sum += i;
      {
        absl::MutexLock lock(&mu);
        ids.insert(std::this_thread::get_id());
      }
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(sum.load(), 4950);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(ids.size(), 3u);
}

TEST(ThreadPoolTest, DestructorDrainsQueue) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(0);  // treated as 1
    for (int i = 0; i < 50; ++i) pool.Submit([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace dataserver
}  // namespace tandem
