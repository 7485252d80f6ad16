#include "common/trace/process_trace.h"

#include <signal.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/io/file.h"
#include "common/trace/testing/trace_json.h"
#include "common/trace/trace.h"
#include "gtest/gtest.h"

namespace tandem {
namespace trace {
namespace {

std::string TmpFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

ProcessTraceOptions Options(const std::string& name) {
  ProcessTraceOptions o;
  o.enabled = true;
  o.steps = 4;
  o.path = TmpFile(name);
  o.track.pid = 3;
  o.track.process_name = "worker rank 3";
  o.poll = absl::Milliseconds(5);
  return o;
}

TEST(ProcessTraceTest, OffInstallsNothing) {
  ProcessTraceOptions o;
  absl::StatusOr<std::unique_ptr<ProcessTrace>> t = ProcessTrace::Start(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, nullptr);
  EXPECT_FALSE(Enabled());
}

TEST(ProcessTraceTest, BadOptionsAreClearErrors) {
  ProcessTraceOptions o = Options("bad.json");
  o.steps = 0;
  EXPECT_NE(ProcessTrace::Start(o).status().message().find("--trace_steps"), std::string::npos);
  o = Options("bad.json");
  o.path.clear();
  EXPECT_NE(ProcessTrace::Start(o).status().message().find("--trace_file"), std::string::npos);
}

TEST(ProcessTraceTest, WritesAtExitShiftedOntoTheReferenceClock) {
  ProcessTraceOptions o = Options("exit.json");
  // A reference 1 s ahead of this process, answering at once.
  o.reference_clock = []() -> absl::StatusOr<int64_t> { return NowNanos() + 1'000'000'000; };
  int64_t before_ns;
  {
    absl::StatusOr<std::unique_ptr<ProcessTrace>> t = ProcessTrace::Start(o);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE(ProcessTrace::Start(o).ok()) << "a second trace in one process";
    before_ns = NowNanos();
    MarkStep(1);
    { Span s("forward", "compute"); }
    SetProcessTrack(5, "worker rank 5", 5);
  }
  EXPECT_FALSE(Enabled());
  absl::StatusOr<std::string> text = ReadFileToString(o.path);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::vector<testing::TraceEvent>> events = testing::ParseTrace(*text);
  ASSERT_TRUE(events.ok()) << events.status();
  bool found = false;
  for (const testing::TraceEvent& e : *events) {
    EXPECT_EQ(e.pid, 5);
    if (e.name == "forward") {
      found = true;
      // Within the shifted interval (the offset's error is tiny here).
      EXPECT_GT(e.ts, (before_ns + 1'000'000'000 - 1'000'000) / 1e3);
    }
  }
  EXPECT_TRUE(found) << *text;
}

TEST(ProcessTraceTest, Sigusr1WritesWhileRunning) {
  ProcessTraceOptions o = Options("usr1.json");
  absl::StatusOr<std::unique_ptr<ProcessTrace>> t = ProcessTrace::Start(o);
  ASSERT_TRUE(t.ok()) << t.status();
  { Span s("checkpoint write", "io"); }
  ASSERT_EQ((*t)->writes(), 0);
  raise(SIGUSR1);
  // The trace's thread serves the flag within its poll interval.
  while ((*t)->writes() == 0) std::this_thread::yield();
  absl::StatusOr<std::string> text = ReadFileToString(o.path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("checkpoint write"), std::string::npos);
  EXPECT_TRUE(testing::ParseTrace(*text).ok());
}

}  // namespace
}  // namespace trace
}  // namespace tandem
