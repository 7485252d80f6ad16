#include "services/worker/abort_switch.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

// Records Abort calls; its collectives are never used by the switch.
class RecordingComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "recording"; }
  absl::Status AllReduce(float*, int64_t, ReduceOp) override { return absl::OkStatus(); }
  absl::Status ReduceScatter(const float*, float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllGather(const void*, void*, int64_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, int64_t, int) override { return absl::OkStatus(); }
  absl::Status AllToAll(const void*, void*, int64_t) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  void Abort(const std::string& reason) override { aborts.push_back(reason); }
  std::vector<std::string> aborts;
};

TEST(AbortSwitch, FireAbortsTheArmedGenerationOnly) {
  RecordingComm ctl, grad;
  AbortSwitch sw;
  sw.Arm(3, {&ctl, nullptr, &grad});
  sw.Fire(2, "an older generation");  // not the armed one
  EXPECT_TRUE(ctl.aborts.empty());
  sw.Fire(3, "rank 1 (w1) missed 3 heartbeats");
  ASSERT_EQ(ctl.aborts.size(), 1u);
  ASSERT_EQ(grad.aborts.size(), 1u);
  EXPECT_EQ(ctl.aborts[0], "rank 1 (w1) missed 3 heartbeats");
  EXPECT_EQ(sw.reason(3), "rank 1 (w1) missed 3 heartbeats");
  sw.Disarm();
  sw.Fire(3, "again");  // disarmed: the comms may be gone
  EXPECT_EQ(ctl.aborts.size(), 1u);
}

TEST(AbortSwitch, FireBeforeArmAbortsAtArm) {
  RecordingComm ctl;
  AbortSwitch sw;
  sw.Fire(5, "generation 5 failed during set-up");
  EXPECT_TRUE(ctl.aborts.empty());
  sw.Arm(5, {&ctl});
  ASSERT_EQ(ctl.aborts.size(), 1u);
  EXPECT_EQ(ctl.aborts[0], "generation 5 failed during set-up");
  RecordingComm next;
  sw.Arm(6, {&next});  // the next generation starts clean
  EXPECT_TRUE(next.aborts.empty());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
