// CoordinatorCore with the straggler detector: step times in heartbeats
// name a slow rank in GetJobStatus, and a generation's end forgets it.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_core.h"
#include "services/coordinator/manual_clock.h"

namespace tandem {
namespace {

class CoordinatorStragglerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.job_id = "job";
    o.min_workers = o.max_workers = 3;
    o.settle_time = absl::ZeroDuration();
    o.clock = [this] { return clock_.Now(); };
    o.straggler.window = 3;
    auto core = CoordinatorCore::Create(o);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    std::vector<std::thread> threads;
    ranks_.resize(3);
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([this, i] {
        v1::JoinRequest r;
        r.mutable_job()->set_job_id("job");
        r.set_worker_id(absl::StrCat("w", i));
        auto reply = core_->Join(r, absl::Seconds(20));
        ASSERT_TRUE(reply.ok()) << reply.status();
        ranks_[i] = reply->rank();
      });
    }
    for (auto& t : threads) t.join();
  }

  // One heartbeat from every worker; worker `slow` spent `extra` seconds per
  // step in `what` ("compute" or "data"), the others waited for it.
  void Round(int slow, const std::string& what, double extra) {
    clock_.Advance(absl::Seconds(1));
    for (int i = 0; i < 3; ++i) {
      v1::HeartbeatRequest r;
      r.set_worker_id(absl::StrCat("w", i));
      r.set_generation(1);
      r.set_rank(ranks_[i]);
      v1::StepTiming* t = r.mutable_timing();
      t->set_steps(10);
      t->set_compute_seconds(10 * (0.010 + (i == slow && what == "compute" ? extra : 0)));
      t->set_data_wait_seconds(10 * (i == slow && what == "data" ? extra : 0));
      t->set_comm_seconds(10 * (0.002 + (i == slow ? 0 : extra)));
      ASSERT_TRUE(core_->Heartbeat(r).ok());
    }
  }

  ManualClock clock_;
  std::unique_ptr<CoordinatorCore> core_;
  std::vector<int> ranks_;
};

TEST_F(CoordinatorStragglerTest, ASlowRankIsNamedInTheJobStatusWithItsCause) {
  for (int i = 0; i < 3; ++i) Round(/*slow=*/2, "data", 0.006);
  const v1::GetJobStatusResponse s = core_->GetJobStatus();
  ASSERT_EQ(s.stragglers_size(), 1) << s.DebugString();
  EXPECT_EQ(s.stragglers(0).worker_id(), "w2");
  EXPECT_EQ(s.stragglers(0).rank(), ranks_[2]);
  EXPECT_EQ(s.stragglers(0).cause(), "data");
  EXPECT_NEAR(s.stragglers(0).slower_fraction(), 0.5, 1e-6);
  EXPECT_EQ(core_->stragglers().size(), 1u);
  EXPECT_EQ(core_->timed_ranks().size(), 3u);
}

TEST_F(CoordinatorStragglerTest, EqualRanksAreNotNamed) {
  for (int i = 0; i < 10; ++i) Round(/*slow=*/-1, "compute", 0);
  EXPECT_EQ(core_->GetJobStatus().stragglers_size(), 0);
}

TEST_F(CoordinatorStragglerTest, TheEndOfTheGenerationForgetsStragglers) {
  // Four rounds: w0 reports first, so its first report has no peers yet.
  for (int i = 0; i < 4; ++i) Round(/*slow=*/0, "compute", 0.006);
  ASSERT_EQ(core_->GetJobStatus().stragglers_size(), 1);
  v1::ReportFailureRequest f;
  f.set_worker_id("w1");
  f.set_generation(1);
  ASSERT_TRUE(core_->ReportFailure(f).ok());
  EXPECT_EQ(core_->GetJobStatus().stragglers_size(), 0);
  EXPECT_TRUE(core_->timed_ranks().empty());
}

TEST(StragglerOptionsInCore, ABadThresholdIsRefusedAtCreate) {
  CoordinatorOptions o;
  o.straggler.threshold = -1;
  auto core = CoordinatorCore::Create(o);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("--straggler_threshold"), std::string::npos);
}

}  // namespace
}  // namespace tandem
