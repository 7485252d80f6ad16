// End to end: `tandem local --trace` with 2 workers for a few steps leaves
// RUN_DIR/trace.json: valid Trace Event JSON (every event has ph, ts, pid,
// tid; durations >= 0; spans nest per thread), one track per rank plus the
// data server, and — clocks aligned — both ranks' allreduce spans of the
// same step overlap in time (a collective cannot finish on one rank before
// it started on the other). `tandem trace --run_dir` on the finished run
// merges the same files again.
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "common/trace/testing/trace_json.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

using trace::testing::TraceEvent;

TEST(TraceE2eTest, TwoRanksOnOneTimeline) {
  const std::string run_dir = TmpPath("trace_run");
  TandemRun r = RunTandem({"local", "--workers=2", "--model=mlp:784,256,10", "--max_steps=12",
                           "--log_every=1000", "--checkpoint_every=0", "--trace",
                           "--trace_steps=8", "--run_dir=" + run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "trace: " + run_dir + "/trace.json (3 process"))
      << r.stdout_text;

  const std::string text = ReadFile(run_dir + "/trace.json");
  absl::StatusOr<std::vector<TraceEvent>> events = trace::testing::ParseTrace(text);
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(trace::testing::CheckNesting(*events).ok()) << trace::testing::CheckNesting(*events);

  std::map<int64_t, std::string> tracks;  // pid -> process name
  // (rank, step) -> the allreduce span of bucket 0: [ts, ts + dur)
  std::map<std::pair<int64_t, int64_t>, std::pair<double, double>> allreduce;
  std::set<int64_t> steps_kept;
  for (const TraceEvent& e : *events) {
    if (e.ph == "M" && e.name == "process_name") tracks[e.pid] = e.str_args.at("name");
    if (e.ph == "X" && e.name == "step" && e.pid == 0) steps_kept.insert(e.num_args.at("step"));
    if (e.ph == "X" && e.name == "allreduce" && e.num_args.count("index") &&
        e.num_args.at("index") == 0) {
      EXPECT_GT(e.num_args.at("bytes"), 0);
      allreduce[{e.pid, static_cast<int64_t>(e.num_args.at("step"))}] = {e.ts, e.ts + e.dur};
    }
  }
  ASSERT_EQ(tracks.size(), 3u) << text.substr(0, 2000);
  EXPECT_EQ(tracks[0], "worker rank 0");
  EXPECT_EQ(tracks[1], "worker rank 1");
  int services = 0;
  for (const auto& [pid, name] : tracks) services += name == "data server";
  EXPECT_EQ(services, 1);
  // --trace_steps=8 of 12: the ring kept the newest 8 (the final
  // checkpoint's write may add no step).
  EXPECT_EQ(steps_kept, (std::set<int64_t>{5, 6, 7, 8, 9, 10, 11, 12}));

  // Each worker measured its offset to the coordinator (Coordinator.Clock).
  // Each offset is known to within half its round trip, so two ranks'
  // aligned times may disagree by up to the sum of the halves.
  double uncertainty_us = 0;
  for (const char* w : {"worker-0", "worker-1"}) {
    const std::string own = ReadFile(run_dir + "/trace/" + w + ".json");
    const std::string key = "\"clock_rtt_us\":";
    const size_t at = own.find(key);
    ASSERT_NE(at, std::string::npos) << w;
    EXPECT_FALSE(absl::StrContains(own, "\"clock_rtt_us\":null")) << w << ": no clock sample";
    uncertainty_us += std::strtod(own.c_str() + at + key.size(), nullptr) / 2;
  }

  int compared = 0;
  for (int64_t step = 5; step <= 12; ++step) {
    auto a = allreduce.find({0, step});
    auto b = allreduce.find({1, step});
    if (a == allreduce.end() || b == allreduce.end()) continue;
    ++compared;
    // Overlap: each started before the other ended, to within the clocks'
    // alignment (a bucket's allreduce can be shorter than that).
    EXPECT_LT(a->second.first, b->second.second + uncertainty_us) << "step " << step;
    EXPECT_LT(b->second.first, a->second.second + uncertainty_us) << "step " << step;
  }
  EXPECT_GE(compared, 6);

  // The same files merged again by the command, after the run.
  TandemRun again = RunTandem({"trace", "--run_dir=" + run_dir});
  ASSERT_EQ(again.exit_code, 0) << again.stderr_text;
  EXPECT_TRUE(absl::StrContains(again.stdout_text, "3 process(es)")) << again.stdout_text;
  EXPECT_TRUE(trace::testing::ParseTrace(ReadFile(run_dir + "/trace.json")).ok());
}

TEST(TraceE2eTest, ARunWithoutTraceIsAClearError) {
  const std::string run_dir = TmpPath("no_trace_run");
  TandemRun r = RunTandem({"trace", "--run_dir=" + run_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "tandem local --trace")) << r.stderr_text;
  TandemRun none = RunTandem({"trace"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(none.stderr_text, "--run_dir")) << none.stderr_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
