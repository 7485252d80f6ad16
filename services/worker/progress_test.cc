#include "services/worker/progress.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

TEST(FormatEtaTest, HoursMinutesSeconds) {
  EXPECT_EQ(FormatEta(0), "0:00:00");
  EXPECT_EQ(FormatEta(151), "0:02:31");
  EXPECT_EQ(FormatEta(3600 * 27 + 61), "27:01:01");
  EXPECT_EQ(FormatEta(-5), "0:00:00");
}

TEST(FormatProfileTest, NamesEveryPhaseAndTheRest) {
  StepTimes t;
  t.forward = 0.003;
  t.backward = 0.006;
  t.comm_wait = 0.0005;
  t.optimizer = 0.001;
  t.data_wait = 0.0001;
  t.total = 0.0126;
  EXPECT_EQ(FormatProfile(t),
            "profile ms/step: forward 3.00 backward 6.00 comm-wait 0.50 optimizer 1.00 "
            "data-wait 0.10 other 2.00 total 12.60");
}

struct Sink {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
};

ProgressPoint Point(int64_t step, int64_t total) {
  ProgressPoint p;
  p.step = step;
  p.total_steps = total;
  p.epoch = 1;
  p.lr = 0.1;
  p.world = 2;
  return p;
}

TEST(ProgressReporterTest, ReportsEveryLogEveryStepsAndAtTheEnd) {
  Sink sink;
  ProgressOptions o;
  o.log_every = 2;
  o.print = true;
  o.sink = sink.fn();
  ProgressReporter r(o);
  StepTimes t;
  t.total = 0.01;
  t.data_wait = 0.001;
  r.AddStep(2.0, 128, t);
  EXPECT_FALSE(r.MaybeReport(Point(1, 3)).has_value());
  r.AddStep(1.0, 128, t);
  auto rec = r.MaybeReport(Point(2, 3));
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->step(), 2);
  EXPECT_DOUBLE_EQ(rec->loss(), 1.5);  // the window's mean
  EXPECT_DOUBLE_EQ(rec->data_wait_seconds(), 0.001);
  r.AddStep(0.5, 128, t);
  rec = r.MaybeReport(Point(3, 3));  // the last step reports whatever the window
  ASSERT_TRUE(rec.has_value());
  EXPECT_DOUBLE_EQ(rec->loss(), 0.5);
  ASSERT_EQ(sink.lines.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(sink.lines[0], "step 2/3 epoch 1 loss 1.5000 lr 0.1000 samples/s "))
      << sink.lines[0];
  EXPECT_TRUE(absl::StrContains(sink.lines[0], " world 2 eta ")) << sink.lines[0];
  EXPECT_TRUE(absl::StrContains(sink.lines[0], " batch 0 world 2 ")) << sink.lines[0];
  // With gradient norms (--batch auto): the window's noise scale. |G|^2 = 1,
  // S = 400 at per-rank 20 and global 40: 1 + 400/20 and 1 + 400/40.
  ProgressPoint q = Point(4, 4);
  q.global_batch = 40;
  q.local_grad_sq = 21;
  q.global_grad_sq = 11;
  r.AddStep(1.0, 40, t);
  rec = r.MaybeReport(q);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->global_batch(), 40);
  EXPECT_EQ(rec->local_batch(), 20);
  EXPECT_DOUBLE_EQ(rec->local_grad_sq(), 21);
  EXPECT_DOUBLE_EQ(rec->global_grad_sq(), 11);
  ASSERT_EQ(sink.lines.size(), 3u);
  EXPECT_TRUE(absl::StrContains(sink.lines[2], " batch 40 noise 400 world 2 ")) << sink.lines[2];
}

TEST(ProgressReporterTest, ProfileLineAndTokensPerSecond) {
  Sink sink;
  ProgressOptions o;
  o.log_every = 1;
  o.print = true;
  o.profile = true;
  o.tokens_per_sample = 128;
  o.sink = sink.fn();
  ProgressReporter r(o);
  StepTimes t;
  t.forward = 0.002;
  t.total = 0.004;
  r.AddStep(3.0, 8, t);
  ASSERT_TRUE(r.MaybeReport(Point(1, 10)).has_value());
  ASSERT_EQ(sink.lines.size(), 2u);
  EXPECT_TRUE(absl::StrContains(sink.lines[0], " tokens/s ")) << sink.lines[0];
  EXPECT_TRUE(absl::StartsWith(sink.lines[1], "profile ms/step: forward 2.00 ")) << sink.lines[1];
}

TEST(ProgressReporterTest, OtherRanksMakeRecordsButPrintNothing) {
  Sink sink;
  ProgressOptions o;
  o.log_every = 1;
  o.print = false;
  o.sink = sink.fn();
  ProgressReporter r(o);
  r.AddStep(1.0, 8, StepTimes());
  EXPECT_TRUE(r.MaybeReport(Point(1, 10)).has_value());
  EXPECT_TRUE(sink.lines.empty());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
