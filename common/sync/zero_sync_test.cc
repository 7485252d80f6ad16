// ZeroSync's options, device refusal and failure paths, on Gloo ranks (a
// thread each). Equivalence with allreduce is zero_equivalence_test.
#include "common/sync/zero_sync.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

ZeroSyncOptions VectorOptions(ZeroStage stage, Communicator* comm, std::vector<float>& params,
                              std::vector<float>& grads) {
  ZeroSyncOptions o;
  o.stage = stage;
  o.comm = comm;
  o.params = params.data();
  o.grads = grads.data();
  o.size = static_cast<int64_t>(params.size());
  o.ready_ranges = {{o.size / 2, o.size}, {0, o.size / 2}};
  o.bucket_cap_mb = 0.001;
  o.make_optimizer = [](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(r, optim::SgdOptions()));
    return std::unique_ptr<optim::Optimizer>(std::move(s));
  };
  return o;
}

absl::Status OneStep(GradientSync& sync, int64_t size) {
  RETURN_IF_ERROR(sync.BeginStep({}));
  sync.OnGradientsReady(size / 2, size);
  sync.OnGradientsReady(0, size / 2);
  optim::StepContext ctx;
  ctx.lr = 0.1f;
  return sync.FinishStep(ctx);
}

class NoopStepper final : public DeviceStepper {
 public:
  absl::StatusOr<double> SumOfSquares(const float*, int64_t) override { return 0.0; }
  absl::Status Step(float*, const float*, int64_t, const optim::StepContext&) override {
    return absl::OkStatus();
  }
  absl::Status LoadState() override { return absl::OkStatus(); }
  absl::Status SaveState() override { return absl::OkStatus(); }
};

TEST(ZeroSyncTest, BadOptionsAreInvalidArgument) {
  std::vector<float> params(10, 1.f), grads(10, 1.f);
  ZeroSyncOptions none = VectorOptions(ZeroStage::kOptimizer, nullptr, params, grads);
  EXPECT_EQ(CreateZeroSync(std::move(none)).status().code(), absl::StatusCode::kInvalidArgument);
  auto results = comm_testing::RunGlooRanks(2, absl::Seconds(30), [&](int, Communicator& comm) -> absl::Status {
    ZeroSyncOptions wrong = VectorOptions(ZeroStage::kGradients, &comm, params, grads);
    wrong.make_optimizer = [](optim::ParamRange)
        -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
      ASSIGN_OR_RETURN(auto s, optim::Sgd::Create({0, 10}, optim::SgdOptions()));
      return std::unique_ptr<optim::Optimizer>(std::move(s));
    };
    absl::Status s = CreateZeroSync(std::move(wrong)).status();
    if (s.code() != absl::StatusCode::kInvalidArgument ||
        s.message().find("owned range") == absl::string_view::npos) {
      return absl::InternalError(std::string("unexpected: ") + s.ToString());
    }
    ZeroSyncOptions clip = VectorOptions(ZeroStage::kOptimizer, &comm, params, grads);
    clip.max_grad_norm = -1;
    if (CreateZeroSync(std::move(clip)).status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError("negative max_grad_norm accepted");
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

// A factory that builds a stepper selects the device path: accepted for
// zero2 (and zero1); clipping on two ranks without host_comm is
// InvalidArgument naming host_comm.
TEST(ZeroSyncTest, DeviceMemoryNeedsHostCommForClipping) {
  std::vector<float> params(10, 1.f), grads(10, 1.f);
  auto results = comm_testing::RunGlooRanks(2, absl::Seconds(30), [&](int, Communicator& comm) -> absl::Status {
    auto noop = [](optim::Optimizer*) -> absl::StatusOr<std::unique_ptr<DeviceStepper>> {
      return std::unique_ptr<DeviceStepper>(new NoopStepper());
    };
    ZeroSyncOptions o = VectorOptions(ZeroStage::kGradients, &comm, params, grads);
    o.make_device_stepper = noop;
    RETURN_IF_ERROR(CreateZeroSync(std::move(o)).status());
    ZeroSyncOptions clip = VectorOptions(ZeroStage::kOptimizer, &comm, params, grads);
    clip.make_device_stepper = noop;
    clip.max_grad_norm = 1.0;
    absl::Status s = CreateZeroSync(std::move(clip)).status();
    if (s.code() != absl::StatusCode::kInvalidArgument ||
        s.message().find("host_comm") == absl::string_view::npos) {
      return absl::InternalError(std::string("unexpected: ") + s.ToString());
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

// Rank 1 leaves after the barrier: rank 0's step fails naming the
// operation and the rank, its parameters are untouched (the gradients never
// arrived), and later calls are FailedPrecondition.
TEST(ZeroSyncTest, PeerThatDisappearsIsAnErrorFromFinishStep) {
  for (ZeroStage stage : {ZeroStage::kOptimizer, ZeroStage::kGradients}) {
    std::vector<float> params(1000, 1.f), grads(1000, 1.f), before;
    absl::Status first, later;
    auto results = comm_testing::RunGlooRanks(2, absl::Milliseconds(500), [&](int rank, Communicator& comm) {
      RETURN_IF_ERROR(comm.Barrier());
      if (rank == 1) return absl::OkStatus();
      ASSIGN_OR_RETURN(auto sync, CreateZeroSync(VectorOptions(stage, &comm, params, grads)));
      before = params;
      first = OneStep(*sync, params.size());
      later = sync->BeginStep({});
      return absl::OkStatus();
    });
    ASSERT_TRUE(results[0].ok()) << results[0];
    ASSERT_FALSE(first.ok());
    const std::string label = stage == ZeroStage::kOptimizer ? "zero1 sync" : "zero2 sync";
    EXPECT_NE(first.message().find(label), std::string::npos) << first;
    EXPECT_NE(first.message().find("rank 0"), std::string::npos) << first;
    EXPECT_EQ(params, before);
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
  }
}

// 10 floats on 4 ranks: shards of 3, rank 3 owns [9, 10) plus 2 padding.
TEST(ZeroSyncTest, OwnedRangesFollowTheShardMap) {
  std::vector<std::vector<float>> params(4, std::vector<float>(10, 1.f));
  std::vector<std::vector<float>> grads(4, std::vector<float>(10, 1.f));
  std::vector<optim::ParamRange> owned(4);
  std::vector<ZeroMemory> memory(4);
  auto results = comm_testing::RunGlooRanks(4, absl::Seconds(30), [&](int rank, Communicator& comm) {
    ASSIGN_OR_RETURN(auto sync, CreateZeroSync(VectorOptions(ZeroStage::kGradients, &comm,
                                                             params[rank], grads[rank])));
    owned[rank] = sync->owned_range();
    memory[rank] = sync->memory();
    // grads are 1 on every rank: the sum is 4, the average 1, and plain SGD
    // at lr 0.1 moves every parameter from 1 to 0.9 on every rank.
    return OneStep(*sync, 10);
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  const int64_t lo[4] = {0, 3, 6, 9}, hi[4] = {3, 6, 9, 10};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(owned[r].lo, lo[r]);
    EXPECT_EQ(owned[r].hi, hi[r]);
    EXPECT_EQ(memory[r].grad_bytes, 3 * 4);
    for (float p : params[r]) EXPECT_FLOAT_EQ(p, 0.9f) << "rank " << r;
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
