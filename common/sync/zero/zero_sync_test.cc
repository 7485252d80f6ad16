// ZeroSync's options, device refusal and failure paths, on Gloo ranks (a
// thread each). Equivalence with allreduce is zero_equivalence_test.
#include "common/sync/zero/zero_sync.h"

#include <cmath>
#include <memory>
#include <utility>
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

class NoopStepper final : public optim::DeviceStepper {
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
    auto noop = [](optim::Optimizer*) -> absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> {
      return std::unique_ptr<optim::DeviceStepper>(new NoopStepper());
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

// A DeviceStepper over host memory: records what it was asked to step and
// delegates to the host optimizer it mirrors, so the device path (in-place
// allreduce, stepper norm and step, in-place gather) runs on Gloo.
class HostStepper final : public optim::DeviceStepper {
 public:
  HostStepper(optim::Optimizer* host, const float* base) : host_(host), base_(base) {}
  absl::StatusOr<double> SumOfSquares(const float* grads, int64_t n) override {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(grads[i]) * grads[i];
    return s;
  }
  absl::Status Step(float* params, const float* grads, int64_t n,
                    const optim::StepContext& ctx) override {
    stepped_lo = params - base_;
    stepped_n = n;
    ++steps;
    return host_->Step(params, grads, n, ctx);
  }
  absl::Status LoadState() override { return absl::OkStatus(); }
  absl::Status SaveState() override { return absl::OkStatus(); }
  int64_t stepped_lo = -1, stepped_n = -1;
  int steps = 0;

 private:
  optim::Optimizer* host_;
  const float* base_;
};

// zero1 and zero2 through a stepper end where zero1 on the host path ends
// (momentum SGD, clipping on, 4 steps), at N = 2 with 12 floats (one
// in-place allgather) and N = 3 with 10 (padded shards: one broadcast per
// owner); every rank holds the same parameters and the stepper saw exactly
// the owned range. host_comm is the same Gloo communicator: the norm is
// combined after every bucket is reduced, so the calls never overlap.
TEST(ZeroSyncTest, DevicePathEqualsTheHostPath) {
  for (const auto& [world, size] : {std::pair<int, int64_t>{2, 12}, {3, 10}}) {
    for (ZeroStage stage : {ZeroStage::kOptimizer, ZeroStage::kGradients}) {
      std::vector<std::vector<float>> host(world), device(world);
      std::vector<optim::ParamRange> owned(world);
      std::vector<HostStepper*> steppers(world, nullptr);  // live inside run only
      std::vector<int64_t> stepped_lo(world, -1), stepped_n(world, -1);
      auto run = [&](bool on_device, std::vector<std::vector<float>>& out) {
        return comm_testing::RunGlooRanks(world, absl::Seconds(30), [&](int rank, Communicator& comm)
                                                                        -> absl::Status {
          std::vector<float> params(size), grads(size);
          for (int64_t i = 0; i < size; ++i) params[i] = 0.1f * static_cast<float>(i) - 0.3f;
          ZeroSyncOptions o = VectorOptions(on_device ? stage : ZeroStage::kOptimizer, &comm,
                                            params, grads);
          o.max_grad_norm = 0.5;
          o.make_optimizer = [](optim::ParamRange r)
              -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
            optim::SgdOptions so;
            so.momentum = 0.9f;
            ASSIGN_OR_RETURN(auto sgd, optim::Sgd::Create(r, so));
            return std::unique_ptr<optim::Optimizer>(std::move(sgd));
          };
          if (on_device) {
            o.host_comm = &comm;
            const float* base = params.data();
            o.make_device_stepper = [&steppers, rank, base](optim::Optimizer* opt)
                -> absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> {
              auto s = std::make_unique<HostStepper>(opt, base);
              steppers[rank] = s.get();
              return std::unique_ptr<optim::DeviceStepper>(std::move(s));
            };
          }
          ASSIGN_OR_RETURN(auto sync, CreateZeroSync(std::move(o)));
          owned[rank] = sync->owned_range();
          for (int step = 0; step < 4; ++step) {
            for (int64_t i = 0; i < size; ++i) {
              grads[i] = std::sin(0.7f * static_cast<float>(i + 1) * (rank + 1) + step);
            }
            RETURN_IF_ERROR(OneStep(*sync, size));
          }
          out[rank] = params;
          if (on_device) {
            if (steppers[rank]->steps != 4) {
              return absl::InternalError("the stepper did not step every time");
            }
            stepped_lo[rank] = steppers[rank]->stepped_lo;
            stepped_n[rank] = steppers[rank]->stepped_n;
          }
          return absl::OkStatus();
        });
      };
      for (const absl::Status& s : run(false, host)) ASSERT_TRUE(s.ok()) << s;
      for (const absl::Status& s : run(true, device)) ASSERT_TRUE(s.ok()) << s;
      for (int r = 0; r < world; ++r) {
        SCOPED_TRACE(testing::Message() << "N=" << world << " stage "
                                        << static_cast<int>(stage) << " rank " << r);
        EXPECT_EQ(stepped_lo[r], owned[r].lo);
        EXPECT_EQ(stepped_n[r], owned[r].size());
        EXPECT_EQ(device[r], device[0]);  // gathered: identical on every rank
        for (int64_t i = 0; i < size; ++i) EXPECT_NEAR(device[r][i], host[0][i], 1e-6) << i;
      }
      EXPECT_NE(host[0][0], -0.3f);  // it trained
    }
  }
}

// zero1's staging is one allgather round's worth, with the gather
// overlapping the next forward (rounds of gather_mb) or not (bucket_cap_mb).
TEST(ZeroSyncTest, GatherStagesOneRound) {
  for (bool overlap : {true, false}) {
    std::vector<int64_t> staging(2, -1);
    auto results = comm_testing::RunGlooRanks(2, absl::Seconds(30), [&](int rank, Communicator& comm)
                                                                         -> absl::Status {
      std::vector<float> params(1000, 1.f), grads(1000, 0.5f);
      ZeroSyncOptions o = VectorOptions(ZeroStage::kOptimizer, &comm, params, grads);
      o.layer_ranges = {{0, 500}, {500, 1000}};
      o.overlap_allgather = overlap;
      ASSIGN_OR_RETURN(auto sync, CreateZeroSync(std::move(o)));
      staging[rank] = sync->memory().staging_bytes;
      return absl::OkStatus();
    });
    for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < 2; ++r) {
      if (overlap) {
        // One round of at most the whole vector: (1 + N) C floats, C <= n / N.
        EXPECT_GT(staging[r], 0) << "rank " << r;
        EXPECT_LE(staging[r], 1500 * 4) << "rank " << r;
      } else {
        EXPECT_GT(staging[r], 0) << "rank " << r;
      }
    }
  }
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
