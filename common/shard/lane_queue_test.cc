#include "common/shard/lane_queue.h"

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem {
namespace shard {
namespace {

LaneJob Job(LaneJob::Kind kind, int chunk) {
  LaneJob j;
  j.kind = kind;
  j.chunk = chunk;
  return j;
}

std::vector<int> Drain(LaneQueue& q, int n, std::vector<LaneJob::Kind>* kinds = nullptr) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    LaneJob j;
    EXPECT_TRUE(q.Next(&j));
    out.push_back(j.chunk);
    if (kinds != nullptr) kinds->push_back(j.kind);
  }
  return out;
}

TEST(LaneQueueTest, FifoWhenNotByChunk) {
  LaneQueue q({.capacity = 8, .lowest_chunk_first = false});
  for (int c : {5, 3, 9, 1}) q.Enqueue(Job(LaneJob::kPush, c));
  EXPECT_EQ(Drain(q, 4), (std::vector<int>{5, 3, 9, 1}));
}

TEST(LaneQueueTest, PushesGoLowestChunkFirst) {
  // Backward queues the last chunks first; the lane sends the first first.
  LaneQueue q({.capacity = 8, .lowest_chunk_first = true});
  for (int c : {9, 7, 5, 3}) q.Enqueue(Job(LaneJob::kPush, c));
  EXPECT_EQ(Drain(q, 1), std::vector<int>{3});
  q.Enqueue(Job(LaneJob::kPush, 1));  // made final later, still lower
  EXPECT_EQ(Drain(q, 4), (std::vector<int>{1, 5, 7, 9}));
}

TEST(LaneQueueTest, NoPushPassesAClose) {
  LaneQueue q({.capacity = 8, .lowest_chunk_first = true});
  q.Enqueue(Job(LaneJob::kPush, 6));
  q.Enqueue(Job(LaneJob::kPush, 4));
  q.Enqueue(Job(LaneJob::kClose, 0));
  q.Enqueue(Job(LaneJob::kPush, 2));  // the next step's
  std::vector<LaneJob::Kind> kinds;
  EXPECT_EQ(Drain(q, 4, &kinds), (std::vector<int>{4, 6, 0, 2}));
  EXPECT_EQ(kinds[2], LaneJob::kClose);
}

TEST(LaneQueueTest, WrapsAroundItsRing) {
  LaneQueue q({.capacity = 3, .lowest_chunk_first = true});
  for (int round = 0; round < 5; ++round) {
    q.Enqueue(Job(LaneJob::kPush, 10 + round));
    q.Enqueue(Job(LaneJob::kPush, round));
    EXPECT_EQ(Drain(q, 2), (std::vector<int>{round, 10 + round}));
  }
}

TEST(LaneQueueTest, PushOrderHoldsALaterChunkUntilItsTurn) {
  // Backward makes chunk 6 final before 2: the lane still sends 2, 4, 6.
  LaneQueue q({.capacity = 8, .lowest_chunk_first = true, .push_order = {2, 4, 6}});
  q.Enqueue(Job(LaneJob::kPush, 6));
  q.Enqueue(Job(LaneJob::kPush, 4));
  int got = -1;
  absl::Notification done;
  std::thread t([&] {
    LaneJob j;
    if (q.Next(&j)) got = j.chunk;
    done.Notify();
  });
  // Nothing is due until 2 arrives: Next must still be waiting.
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  q.Enqueue(Job(LaneJob::kPush, 2));
  done.WaitForNotification();
  t.join();
  EXPECT_EQ(got, 2);
  EXPECT_EQ(Drain(q, 2), (std::vector<int>{4, 6}));
  // A new step (after the close) starts the order again.
  q.Enqueue(Job(LaneJob::kClose, 0));
  q.Enqueue(Job(LaneJob::kPush, 4));
  q.Enqueue(Job(LaneJob::kPush, 2));
  std::vector<LaneJob::Kind> kinds;
  EXPECT_EQ(Drain(q, 3, &kinds), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(kinds[0], LaneJob::kClose);
}

TEST(LaneQueueTest, AnAbandonedStepSendsWhatIsQueued) {
  // Chunk 2 never comes (the step was abandoned): the close releases 4.
  LaneQueue q({.capacity = 8, .lowest_chunk_first = true, .push_order = {2, 4}});
  q.Enqueue(Job(LaneJob::kPush, 4));
  q.Enqueue(Job(LaneJob::kClose, 0));
  std::vector<LaneJob::Kind> kinds;
  EXPECT_EQ(Drain(q, 2, &kinds), (std::vector<int>{4, 0}));
  EXPECT_EQ(kinds[1], LaneJob::kClose);
}

TEST(LaneQueueTest, UnlistedChunksGoWhenNothingListedIsDue) {
  LaneQueue q({.capacity = 8, .lowest_chunk_first = true, .push_order = {1, 3}});
  q.Enqueue(Job(LaneJob::kPush, 3));
  q.Enqueue(Job(LaneJob::kPush, 8));  // not this rank's usual chunk
  EXPECT_EQ(Drain(q, 1), std::vector<int>{8});
  q.Enqueue(Job(LaneJob::kPush, 1));
  EXPECT_EQ(Drain(q, 2), (std::vector<int>{1, 3}));
}

TEST(LaneQueueTest, NextWaitsForAJobAndStopEndsIt) {
  LaneQueue q({.capacity = 2});
  int got = -1;
  bool ended = false;
  absl::Notification first;
  std::thread t([&] {
    LaneJob j;
    if (q.Next(&j)) got = j.chunk;
    first.Notify();
    ended = !q.Next(&j);  // blocks until Stop
  });
  q.Enqueue(Job(LaneJob::kPull, 7));
  first.WaitForNotification();
  q.Stop();
  t.join();
  EXPECT_EQ(got, 7);
  EXPECT_TRUE(ended);
}

TEST(PullGateTest, HoldsAPullUntilItsPushIsWritten) {
  PullGate g(4);
  g.PushQueued(2);
  LaneJob pull = Job(LaneJob::kPull, 2);
  pull.step = 11;
  EXPECT_FALSE(g.Admit(pull));
  LaneJob out;
  ASSERT_TRUE(g.PushWritten(2, &out));
  EXPECT_EQ(out.chunk, 2);
  EXPECT_EQ(out.step, 11);
  EXPECT_EQ(out.kind, LaneJob::kPull);
  // Once written, a later pull of the chunk goes at once.
  EXPECT_TRUE(g.Admit(Job(LaneJob::kPull, 2)));
}

TEST(PullGateTest, PassesPullsWithNoPushQueued) {
  PullGate g(3);
  EXPECT_TRUE(g.Admit(Job(LaneJob::kPull, 0)));
  LaneJob out;
  g.PushQueued(1);
  EXPECT_FALSE(g.PushWritten(1, &out));  // nothing held: nothing released
  EXPECT_TRUE(g.Admit(Job(LaneJob::kPull, 1)));
}

TEST(PullGateTest, ResetForgetsTheLastStep) {
  PullGate g(2);
  g.PushQueued(0);
  g.Reset();
  EXPECT_TRUE(g.Admit(Job(LaneJob::kPull, 0)));
}

}  // namespace
}  // namespace shard
}  // namespace tandem
