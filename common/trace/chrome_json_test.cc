#include "common/trace/chrome_json.h"

#include <map>
#include <set>

#include "common/trace/testing/trace_json.h"
#include "gtest/gtest.h"

namespace tandem {
namespace trace {
namespace {

using testing::CheckNesting;
using testing::ParseTrace;
using testing::TraceEvent;

std::vector<Event> StepOnTwoThreads(int comm_tid) {
  std::vector<Event> e;
  Event fwd{"forward", "compute", 1'000'000, 2'000, 1, -1, -1, 0, 'X'};
  Event bwd{"backward", "compute", 1'002'000, 3'000, 1, -1, -1, 0, 'X'};
  Event step{"step", "step", 999'000, 7'500, 1, -1, 1, 0, 'X'};
  Event bucket{"allreduce", "comm", 1'003'000, 2'500, 1, 4096, 0, comm_tid, 'X'};
  Event gen{"generation", "control", 998'000, 0, 0, -1, 3, 0, 'i'};
  return {gen, fwd, bucket, bwd, step};
}

TEST(ChromeJsonTest, ValidTraceEventsWithMetadataArgsAndOffset) {
  SetThreadName("json-test-main");
  const int main_tid = ThisThreadId();
  std::vector<Event> events = StepOnTwoThreads(main_tid + 1000);
  for (Event& e : events) {
    if (e.tid == 0) e.tid = main_tid;
  }
  TraceFileInfo info;
  info.pid = 1;
  info.process_name = "worker \"rank\" 1";  // quotes are escaped
  info.offset_ns = -500;
  const std::string json = ChromeTraceJson(events, info);
  absl::StatusOr<std::vector<TraceEvent>> parsed = ParseTrace(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << json;
  EXPECT_TRUE(CheckNesting(*parsed).ok()) << CheckNesting(*parsed);
  std::map<std::string, const TraceEvent*> by_name;
  std::set<std::string> thread_names;
  for (const TraceEvent& e : *parsed) {
    EXPECT_EQ(e.pid, 1);
    if (e.ph == "M" && e.name == "thread_name") thread_names.insert(e.str_args.at("name"));
    if (e.ph == "M" && e.name == "process_name") {
      EXPECT_EQ(e.str_args.at("name"), "worker \"rank\" 1");
    }
    if (e.ph != "M") by_name[e.name] = &e;
  }
  EXPECT_EQ(thread_names, (std::set<std::string>{"json-test-main",
                                                 "thread " + std::to_string(main_tid + 1000)}));
  ASSERT_EQ(by_name.size(), 5u);
  EXPECT_DOUBLE_EQ(by_name["forward"]->ts, 999.5);  // (1'000'000 - 500) ns
  EXPECT_DOUBLE_EQ(by_name["forward"]->dur, 2.0);
  EXPECT_EQ(by_name["allreduce"]->num_args.at("bytes"), 4096);
  EXPECT_EQ(by_name["allreduce"]->num_args.at("index"), 0);
  EXPECT_EQ(by_name["step"]->num_args.at("step"), 1);
  EXPECT_EQ(by_name["generation"]->ph, "i");
  EXPECT_EQ(by_name["generation"]->num_args.at("index"), 3);
}

TEST(ChromeJsonTest, SpansThatCrossOnOneThreadAreCaughtByTheChecker) {
  std::vector<Event> events = {{"a", "t", 0, 10'000, 0, -1, -1, 5, 'X'},
                               {"b", "t", 5'000, 10'000, 0, -1, -1, 5, 'X'}};
  absl::StatusOr<std::vector<TraceEvent>> parsed = ParseTrace(ChromeTraceJson(events, {}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(CheckNesting(*parsed).ok());
}

TEST(ChromeJsonTest, MergeKeepsEveryProcessAndIsValid) {
  TraceFileInfo a;
  a.pid = 0;
  a.process_name = "worker rank 0";
  TraceFileInfo b;
  b.pid = 1000;
  b.process_name = "data server";
  absl::StatusOr<std::string> merged = MergeChromeTraces(
      {ChromeTraceJson(StepOnTwoThreads(7), a), ChromeTraceJson({}, b)});
  ASSERT_TRUE(merged.ok()) << merged.status();
  absl::StatusOr<std::vector<TraceEvent>> parsed = ParseTrace(*merged);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << *merged;
  std::set<int64_t> pids;
  int spans = 0;
  for (const TraceEvent& e : *parsed) {
    pids.insert(e.pid);
    spans += e.ph == "X";
  }
  EXPECT_EQ(pids, (std::set<int64_t>{0, 1000}));
  EXPECT_EQ(spans, 4);
}

TEST(ChromeJsonTest, MergeRefusesATruncatedFile) {
  const std::string good = ChromeTraceJson(StepOnTwoThreads(7), {});
  absl::StatusOr<std::string> merged = MergeChromeTraces({good, good.substr(0, good.size() / 2)});
  EXPECT_EQ(merged.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(merged.status().message().find("trace file 2 of 2"), std::string::npos);
  EXPECT_FALSE(ParseTrace(good.substr(0, good.size() / 2)).ok());
}

}  // namespace
}  // namespace trace
}  // namespace tandem
