#include "common/trace/recorder.h"

#include <unistd.h>

#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "common/trace/trace.h"
#include "gtest/gtest.h"

namespace tandem {
namespace trace {
namespace {

// Resident set size of this process in bytes (/proc/self/statm), or -1.
int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : -1;
}

void RecordSteps(Recorder& r, int64_t first, int64_t count, int per_step) {
  for (int64_t s = first; s < first + count; ++s) {
    r.BeginStep(s);
    for (int e = 0; e < per_step; ++e) r.Complete("span", "test", s * 100 + e, 1, e, s);
  }
}

TEST(RecorderTest, KeepsTheNewestStepsAfterWrapping) {
  Recorder r(RecorderOptions{.steps = 5, .events_per_step = 4});
  EXPECT_EQ(r.capacity(), 20);
  RecordSteps(r, 1, 1000, 3);
  const std::vector<Event> events = r.Snapshot();
  std::set<int64_t> steps;
  for (const Event& e : events) steps.insert(e.step);
  EXPECT_EQ(steps, (std::set<int64_t>{996, 997, 998, 999, 1000}));
  ASSERT_EQ(events.size(), 15u);
  EXPECT_EQ(events.front().ts_ns, 996 * 100);  // oldest first
  EXPECT_EQ(events.back().ts_ns, 1000 * 100 + 2);
  EXPECT_EQ(events.back().bytes, 2);
  EXPECT_EQ(events.back().index, 1000);
}

TEST(RecorderTest, BusyStepsShortenWhatIsKeptNeverTheMemory) {
  Recorder r(RecorderOptions{.steps = 5, .events_per_step = 4});
  const size_t bytes = r.allocated_bytes();
  RecordSteps(r, 1, 10, 9);  // more events per step than budgeted
  const std::vector<Event> events = r.Snapshot();
  EXPECT_EQ(events.size(), 20u);  // the ring, not 5 steps of 9
  EXPECT_EQ(events.back().step, 10);
  EXPECT_EQ(r.allocated_bytes(), bytes);
}

TEST(RecorderTest, MemoryStaysAtTheCapOverALongRun) {
  Recorder r(RecorderOptions{.steps = 200, .events_per_step = 128});
  const size_t cap_bytes = r.allocated_bytes();
  EXPECT_LT(cap_bytes, 4u << 20) << "the default ring should stay a few MiB";
  RecordSteps(r, 1, 400, 128);  // every slot touched twice
  const int64_t rss_warm = ResidentBytes();
  RecordSteps(r, 401, 20000, 128);  // 2.5 M more events
  const int64_t rss_after = ResidentBytes();
  EXPECT_EQ(r.allocated_bytes(), cap_bytes);
  EXPECT_EQ(r.recorded(), 20400 * 128);
  if (rss_warm > 0 && rss_after > 0) {
    EXPECT_LT(rss_after - rss_warm, 1 << 20) << "recording grew the process";
  }
  EXPECT_EQ(r.Snapshot().size(), static_cast<size_t>(r.capacity()));
}

TEST(RecorderTest, EventsBeforeTheFirstStepAreKeptWhileTheyFit) {
  Recorder r(RecorderOptions{.steps = 3, .events_per_step = 10});
  r.Instant("generation", "control", 5, 2);
  RecordSteps(r, 1, 2, 2);
  const std::vector<Event> events = r.Snapshot();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].phase, 'i');
  EXPECT_EQ(events[0].index, 2);
  EXPECT_EQ(events[0].step, 0);
}

TEST(RecorderTest, ThreadsRecordAtOnceAndGetTheirOwnIds) {
  Recorder r(RecorderOptions{.steps = 1, .events_per_step = 4000});
  std::vector<std::thread> threads;
  std::vector<int> tids(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, &tids, t] {
      tids[t] = ThisThreadId();
      SetThreadName(t % 2 == 0 ? "even" : "odd");
      for (int i = 0; i < 1000; ++i) r.Complete("x", "test", i, 1);
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<Event> events = r.Snapshot();
  EXPECT_EQ(events.size(), 4000u);
  std::set<int> seen;
  for (const Event& e : events) seen.insert(e.tid);
  EXPECT_EQ(seen, std::set<int>(tids.begin(), tids.end()));
  EXPECT_STREQ(ThreadName(tids[1]), "odd");
}

TEST(RecorderTest, InternKeepsOneCopyPerString) {
  std::string a = "allreduce";
  const char* p = Intern(a);
  a[0] = 'X';
  EXPECT_STREQ(p, "allreduce");
  EXPECT_EQ(Intern("allreduce"), p);
}

TEST(TraceTest, SpansGoToTheInstalledRecorderOnly) {
  Recorder r(RecorderOptions{.steps = 2, .events_per_step = 8});
  { Span off("before", "test"); }
  Install(&r);
  MarkStep(7);
  {
    Span outer("outer", "test");
    Span inner("inner", "test", 64, 3);
  }
  MarkInstant("moment", "test", 9);
  Install(nullptr);
  { Span off("after", "test"); }
  const std::vector<Event> events = r.Snapshot();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_STREQ(events[0].name, "inner");  // recorded when it ends
  EXPECT_EQ(events[0].bytes, 64);
  EXPECT_EQ(events[0].step, 7);
  EXPECT_STREQ(events[1].name, "outer");
  EXPECT_LE(events[1].ts_ns, events[0].ts_ns);
  EXPECT_GE(events[1].ts_ns + events[1].dur_ns, events[0].ts_ns + events[0].dur_ns);
  EXPECT_EQ(events[2].phase, 'i');
}

}  // namespace
}  // namespace trace
}  // namespace tandem
