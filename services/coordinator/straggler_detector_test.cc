#include "services/coordinator/straggler_detector.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/coordinator/manual_clock.h"

namespace tandem {
namespace {

// Per-step milliseconds of one rank in one report.
struct Ms {
  double compute = 10, data = 0, comm = 0, other = 0;
};

constexpr int kSteps = 10;  // steps per report

class StragglerDetectorTest : public ::testing::Test {
 protected:
  StragglerDetectorTest() { Make(StragglerOptions()); }

  void Make(StragglerOptions o) {
    o.clock = [this] { return clock_.Now(); };
    detector_ = std::make_unique<StragglerDetector>(o);
  }

  // One heartbeat of every rank, in rank order; the events it caused.
  std::vector<StragglerEvent> Round(const std::vector<Ms>& ranks) {
    clock_.Advance(absl::Seconds(1));
    std::vector<StragglerEvent> events;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
      v1::StepTiming t;
      t.set_steps(kSteps);
      t.set_compute_seconds(ranks[r].compute * kSteps / 1e3);
      t.set_data_wait_seconds(ranks[r].data * kSteps / 1e3);
      t.set_comm_seconds(ranks[r].comm * kSteps / 1e3);
      t.set_other_seconds(ranks[r].other * kSteps / 1e3);
      if (auto e = detector_->Report(r, absl::StrCat("worker-", r), t)) events.push_back(*e);
    }
    return events;
  }

  // Rounds until the first event (at most `limit`); the round it came in
  // (1-based) and the event, or 0.
  std::pair<int, std::optional<StragglerEvent>> FirstEvent(const std::vector<Ms>& ranks,
                                                           int limit = 20) {
    for (int i = 1; i <= limit; ++i) {
      std::vector<StragglerEvent> e = Round(ranks);
      if (!e.empty()) {
        EXPECT_EQ(e.size(), 1u);
        return {i, e[0]};
      }
    }
    return {0, std::nullopt};
  }

  ManualClock clock_;
  std::unique_ptr<StragglerDetector> detector_;
};

// A synchronous step: every rank's exposed communication includes waiting
// for the latest rank to arrive (compute + data), plus `net` of its own.
std::vector<Ms> Synchronous(std::vector<Ms> ranks, double net = 2) {
  double latest = 0;
  for (const Ms& m : ranks) latest = std::max(latest, m.compute + m.data + m.other);
  for (Ms& m : ranks) m.comm += latest - (m.compute + m.data + m.other) + net;
  return ranks;
}

TEST_F(StragglerDetectorTest, NamesASlowComputeRankAfterTheWindowWithCauseCompute) {
  // Rank 2's step (compute 13.6 + net 2) is 30% above the others' (10 + 2,
  // their wait of 3.6 for rank 2 taken out of their communication).
  const std::vector<Ms> ranks = Synchronous({{}, {}, {.compute = 13.6}, {}});
  auto [round, e] = FirstEvent(ranks);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(round, StragglerOptions().window);
  EXPECT_TRUE(e->named);
  EXPECT_EQ(e->straggler.rank(), 2);
  EXPECT_EQ(e->straggler.worker_id(), "worker-2");
  EXPECT_EQ(e->straggler.cause(), "compute");
  EXPECT_NEAR(e->straggler.slower_fraction(), 0.30, 1e-6);
  EXPECT_EQ(e->straggler.steps(), StragglerOptions().window * kSteps);
  EXPECT_TRUE(absl::StartsWith(
      e->line, "straggler: rank 2 (worker-2) is 30% slower than the median for 50 steps: compute"))
      << e->line;
  ASSERT_EQ(detector_->Named().size(), 1u);
  EXPECT_EQ(detector_->Named()[0].rank(), 2);
  EXPECT_EQ(detector_->Named()[0].message(), e->line);
  // Still slow: no second event, still named.
  EXPECT_TRUE(Round(ranks).empty());
  EXPECT_EQ(detector_->Named().size(), 1u);
}

TEST_F(StragglerDetectorTest, NamesASlowDataRankWithCauseData) {
  const std::vector<Ms> ranks = Synchronous({{}, {.compute = 10, .data = 3.6}, {}, {}});
  auto [round, e] = FirstEvent(ranks);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->straggler.rank(), 1);
  EXPECT_EQ(e->straggler.cause(), "data");
  EXPECT_NEAR(e->straggler.slower_fraction(), 0.30, 1e-6);
}

TEST_F(StragglerDetectorTest, NamesASlowNetworkRankWithCauseNetwork) {
  // Everyone arrives together; rank 3's own communication takes 3.6 ms
  // more (its sends), which no wait for a peer explains.
  std::vector<Ms> ranks = Synchronous({{}, {}, {}, {}});
  ranks[3].comm += 3.6;
  auto [round, e] = FirstEvent(ranks);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->straggler.rank(), 3);
  EXPECT_EQ(e->straggler.cause(), "network");
  EXPECT_NEAR(e->straggler.slower_fraction(), 0.30, 1e-6);
}

TEST_F(StragglerDetectorTest, NamesNobodyWhenAllAreEqualOrWithin20Percent) {
  EXPECT_EQ(FirstEvent(Synchronous({{}, {}, {}, {}}), 30).first, 0);
  // Rank 1 is 20% slower (compute 12.4 + 2 against 12): below 25%.
  EXPECT_EQ(FirstEvent(Synchronous({{}, {.compute = 12.4}, {}, {}}), 30).first, 0);
  EXPECT_TRUE(detector_->Named().empty());
}

TEST_F(StragglerDetectorTest, TimeBetweenStepsIsNotSlownessOfAnyone) {
  // Rank 0 writes checkpoints (6 ms a step between steps); the others wait
  // for it in their collectives. Neither it nor they are stragglers.
  EXPECT_EQ(FirstEvent(Synchronous({{.other = 6}, {}}), 30).first, 0);
  EXPECT_EQ(FirstEvent(Synchronous({{.other = 6}, {}, {}, {}}), 30).first, 0);
}

TEST_F(StragglerDetectorTest, AnInterruptedStreakStartsOver) {
  const std::vector<Ms> slow = Synchronous({{}, {.compute = 13.6}, {}});
  const std::vector<Ms> fine = Synchronous({{}, {}, {}});
  for (int i = 0; i < 2 * StragglerOptions().window; ++i) {
    // window - 1 slow reports, then one normal one: never named.
    EXPECT_TRUE(Round(i % StragglerOptions().window == 4 ? fine : slow).empty()) << i;
  }
  EXPECT_TRUE(detector_->Named().empty());
}

TEST_F(StragglerDetectorTest, ClearsAfterTheWindowOnceRecoveredWithHysteresis) {
  ASSERT_TRUE(FirstEvent(Synchronous({{}, {}, {.compute = 13.6}, {}})).second.has_value());
  // 15% slower: below the threshold but above the clear line (12.5%):
  // stays named (no flapping).
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(Round(Synchronous({{}, {}, {.compute = 11.8}, {}})).empty());
  }
  ASSERT_EQ(detector_->Named().size(), 1u);
  auto [round, e] = FirstEvent(Synchronous({{}, {}, {}, {}}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(round, StragglerOptions().window);
  EXPECT_FALSE(e->named);
  EXPECT_EQ(e->straggler.rank(), 2);
  EXPECT_TRUE(absl::StartsWith(e->line, "straggler cleared: rank 2 (worker-2)")) << e->line;
  EXPECT_TRUE(detector_->Named().empty());
}

TEST_F(StragglerDetectorTest, TwoRanksCompareWithTheOtherRank) {
  auto [round, e] = FirstEvent(Synchronous({{.compute = 13.6}, {}}));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->straggler.rank(), 0);
  EXPECT_EQ(e->straggler.cause(), "compute");
  EXPECT_NEAR(e->straggler.slower_fraction(), 0.30, 1e-6);
  ASSERT_EQ(detector_->Named().size(), 1u);  // the faster rank is not named
}

TEST_F(StragglerDetectorTest, OneRankIsNeverNamed) {
  EXPECT_EQ(FirstEvent({{.compute = 100}}).first, 0);
}

TEST_F(StragglerDetectorTest, TinyAbsoluteDifferencesAreNotStragglers) {
  // 50% slower, but by 0.5 ms per step (< min_excess, 1 ms): jitter.
  EXPECT_EQ(FirstEvent(Synchronous({{.compute = 1}, {.compute = 1.5}, {.compute = 1}}, 0)).first,
            0);
}

TEST_F(StragglerDetectorTest, StaleRanksAreLeftOutAndResetForgetsEveryone) {
  StragglerOptions o;
  o.window = 1;
  Make(o);
  Round(Synchronous({{}, {}, {}}));
  clock_.Advance(absl::Seconds(30));  // ranks 0 and 1 fall silent (stale)
  v1::StepTiming t;
  t.set_steps(1);
  t.set_compute_seconds(0.1);
  EXPECT_FALSE(detector_->Report(2, "worker-2", t).has_value()) << "nobody fresh to compare with";
  EXPECT_EQ(detector_->Ranks(), (std::vector<int>{0, 1, 2}));
  detector_->Reset();
  EXPECT_TRUE(detector_->Ranks().empty());
}

TEST_F(StragglerDetectorTest, ReportsWithoutStepsAreIgnored) {
  v1::StepTiming none;
  EXPECT_FALSE(detector_->Report(0, "worker-0", none).has_value());
  EXPECT_TRUE(detector_->Ranks().empty());
}

TEST(StragglerOptionsTest, BadValuesNameTheFlag) {
  StragglerOptions o;
  EXPECT_TRUE(ValidateStragglerOptions(o).ok());
  o.threshold = 0;
  EXPECT_TRUE(absl::StrContains(ValidateStragglerOptions(o).message(), "--straggler_threshold"));
  o = StragglerOptions();
  o.window = 0;
  EXPECT_TRUE(absl::StrContains(ValidateStragglerOptions(o).message(), "--straggler_window"));
  o = StragglerOptions();
  o.clear_threshold = 0.3;
  EXPECT_FALSE(ValidateStragglerOptions(o).ok());
}

}  // namespace
}  // namespace tandem
