// "allreduce" through the registry: it is registered by linking
// :allreduce_strategy, its --sync_opt keys are described in errors, hier is
// 0 or 1 and decides NeedsNodeGroups, and
// CreateGradientSync builds a working AllreduceSync from SyncOptions +
// SyncEnv (the optimizer over [0, size), the bucket cap, the clip, the
// device stepper factory). One process, a fake communicator.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/optim/sgd.h"
#include "common/sync/registry.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

// Pretends two ranks hold the same data; counts allreduces.
class DoublingCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "fake"; }
  absl::Status AllReduce(float* data, int64_t count, ReduceOp) override {
    ++allreduces;
    for (int64_t i = 0; i < count; ++i) data[i] *= 2;
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const float*, float*, int64_t) override { return Unused(); }
  absl::Status AllGather(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Broadcast(void*, int64_t, int) override { return Unused(); }
  absl::Status AllToAll(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }
  int allreduces = 0;  // written by the communication thread, read after FinishStep

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not used"); }
};

constexpr int64_t kSize = 40;

TEST(AllreduceStrategy, IsRegisteredWithItsKeys) {
  absl::StatusOr<StrategyInfo> info = FindStrategy("allreduce");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->needs_node_groups);
  EXPECT_FALSE(info->summary.empty());
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("allreduce", "bucket_cap_mb=8,k=1");
  ASSERT_TRUE(o.ok()) << o.status();
  // The error names the bad key and the strategy, and lists every valid key.
  const absl::Status bad_key = ValidateSyncOptions(*o);
  EXPECT_EQ(bad_key.code(), absl::StatusCode::kInvalidArgument) << bad_key;
  for (const char* part : {"'k' is not an option of strategy 'allreduce'", "bucket_cap_mb (",
                           "hier (", "max_grad_norm (", "step_per_bucket ("}) {
    EXPECT_TRUE(absl::StrContains(bad_key.message(), part)) << part << " in " << bad_key;
  }
  SyncOptions unknown;
  unknown.strategy = "x";
  const absl::Status bad_name = ValidateSyncOptions(unknown);
  EXPECT_EQ(bad_name.code(), absl::StatusCode::kInvalidArgument) << bad_name;
  EXPECT_TRUE(absl::StrContains(bad_name.message(), "--sync 'x' is unknown")) << bad_name;
  EXPECT_TRUE(absl::StrContains(bad_name.message(), "registered strategies are allreduce"))
      << bad_name;
}

TEST(AllreduceStrategy, HierIsZeroOrOneAndDecidesNodeGroups) {
  absl::StatusOr<StrategyInfo> info = FindStrategy("allreduce");
  ASSERT_TRUE(info.ok()) << info.status();
  for (const char* good : {"", "hier=0", "hier=1"}) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("allreduce", good);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_TRUE(ValidateSyncOptions(*o).ok()) << good << ": " << ValidateSyncOptions(*o);
    EXPECT_EQ(NeedsNodeGroups(*info, *o), std::string(good) == "hier=1") << good;
  }
  absl::StatusOr<SyncOptions> two = ParseSyncOptions("allreduce", "hier=2");
  ASSERT_TRUE(two.ok());
  absl::Status s = ValidateSyncOptions(*two);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--sync allreduce: hier must be 0 (flat ring allreduce) or 1 "
                             "(hierarchical allreduce), got 2"),
            std::string::npos)
      << s;
  absl::StatusOr<SyncOptions> word = ParseSyncOptions("allreduce", "hier=yes");
  ASSERT_TRUE(word.ok());
  EXPECT_NE(ValidateSyncOptions(*word).message().find("hier='yes' is not an integer"),
            std::string::npos);
  EXPECT_FALSE(NeedsNodeGroups(*info, *word));
}

TEST(AllreduceStrategy, StepPerBucketIsZeroOrOne) {
  for (const char* good : {"step_per_bucket=0", "step_per_bucket=1"}) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("allreduce", good);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_TRUE(ValidateSyncOptions(*o).ok()) << good << ": " << ValidateSyncOptions(*o);
  }
  absl::StatusOr<SyncOptions> two = ParseSyncOptions("allreduce", "step_per_bucket=2");
  ASSERT_TRUE(two.ok());
  const absl::Status s = ValidateSyncOptions(*two);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "step_per_bucket must be 0")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "got 2")) << s;
}

TEST(AllreduceStrategy, HierWithoutNodeGroupsIsAnError) {
  CommGroups groups;
  groups.world = std::make_unique<DoublingCommunicator>();
  std::vector<float> params(kSize, 0.f), grads(kSize, 0.f);
  SyncEnv env;
  env.comms = &groups;
  env.params = params.data();
  env.grads = grads.data();
  env.size = kSize;
  env.ready_ranges = {{0, kSize}};
  env.make_optimizer =
      [](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    absl::StatusOr<std::unique_ptr<optim::Sgd>> sgd = optim::Sgd::Create(r, optim::SgdOptions());
    if (!sgd.ok()) return sgd.status();
    return std::unique_ptr<optim::Optimizer>(std::move(*sgd));
  };
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("allreduce", "hier=1");
  ASSERT_TRUE(o.ok());
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = CreateGradientSync(*o, std::move(env));
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sync.status().message().find("needs the intra-node and inter-node groups"),
            std::string::npos)
      << sync.status();
}

TEST(AllreduceStrategy, CreateGradientSyncBuildsAWorkingAllreduce) {
  CommGroups groups;
  auto owned = std::make_unique<DoublingCommunicator>();
  DoublingCommunicator* comm = owned.get();
  groups.world = std::move(owned);
  std::vector<float> params(kSize, 0.f), grads(kSize, 0.f);
  SyncEnv env;
  env.comms = &groups;
  env.params = params.data();
  env.grads = grads.data();
  env.size = kSize;
  env.ready_ranges = {{30, 40}, {20, 30}, {10, 20}, {0, 10}};
  optim::ParamRange asked{-1, -1};
  env.make_optimizer =
      [&asked](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    asked = r;
    absl::StatusOr<std::unique_ptr<optim::Sgd>> sgd = optim::Sgd::Create(r, optim::SgdOptions());
    if (!sgd.ok()) return sgd.status();
    return std::unique_ptr<optim::Optimizer>(std::move(*sgd));
  };
  // 0.0001 MiB = 26 floats: two ranges of 10 per bucket, two buckets.
  absl::StatusOr<SyncOptions> o =
      ParseSyncOptions("allreduce", "bucket_cap_mb=0.0001,max_grad_norm=1");
  ASSERT_TRUE(o.ok()) << o.status();
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = CreateGradientSync(*o, std::move(env));
  ASSERT_TRUE(sync.ok()) << sync.status();
  GradientSync& s = **sync;
  EXPECT_EQ(s.name(), "allreduce");
  EXPECT_EQ(asked.lo, 0);
  EXPECT_EQ(asked.hi, kSize);
  EXPECT_EQ(s.owned_range().hi, kSize);
  ASSERT_NE(s.optimizer(), nullptr);
  EXPECT_EQ(s.optimizer()->range().size(), kSize);

  grads[3] = 3.f;
  grads[37] = 4.f;  // summed (x2) then averaged (/2): norm 5, clipped to 1
  ASSERT_TRUE(s.BeginStep({}).ok());
  for (const auto& [lo, hi] :
       std::vector<std::pair<int64_t, int64_t>>{{30, 40}, {20, 30}, {10, 20}, {0, 10}}) {
    s.OnGradientsReady(lo, hi);
  }
  optim::StepContext ctx;
  ctx.lr = 1.f;
  ASSERT_TRUE(s.FinishStep(ctx).ok());
  EXPECT_EQ(comm->allreduces, 2);
  EXPECT_EQ(s.stats().buckets, 2);
  EXPECT_NEAR(params[3], -0.6f, 1e-6);
  EXPECT_NEAR(params[37], -0.8f, 1e-6);
}

TEST(AllreduceStrategy, DeviceStepperFactoryComesFromTheEnv) {
  CommGroups groups;
  groups.world = std::make_unique<DoublingCommunicator>();
  std::vector<float> params(kSize, 0.f), grads(kSize, 0.f);
  SyncEnv env;
  env.comms = &groups;
  env.params = params.data();
  env.grads = grads.data();
  env.size = kSize;
  env.ready_ranges = {{0, kSize}};
  env.make_optimizer =
      [](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    absl::StatusOr<std::unique_ptr<optim::Sgd>> sgd = optim::Sgd::Create(r, optim::SgdOptions());
    if (!sgd.ok()) return sgd.status();
    return std::unique_ptr<optim::Optimizer>(std::move(*sgd));
  };
  env.make_device_stepper =
      [](optim::Optimizer*) -> absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> {
    return absl::UnimplementedError("no device stepper for backend 'tpu'");
  };
  SyncOptions o;
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = CreateGradientSync(o, std::move(env));
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(sync.status().message().find("backend 'tpu'"), std::string::npos) << sync.status();
}

}  // namespace
}  // namespace sync
}  // namespace tandem
