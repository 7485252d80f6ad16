// `allreduce` with --sync_opt wire=fp16 / bf16 (the fair half-precision
// baseline) on 2 and 3 Gloo ranks (a thread each), through the registry:
// the summed gradients equal the fp32 ring's within the wire format's
// rounding, are really rounded (not the fp32 bits), identical on every
// rank, and encode to half of fp32's bytes; a bad wire value is refused.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/synthetic_training.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int64_t kSize = 5000;
const std::vector<std::pair<int64_t, int64_t>> kRanges = {{2000, kSize}, {7, 2000}, {0, 7}};

struct Result {
  std::vector<float> grads;  // rank 0's summed gradients
  int64_t before = 0;  // stats().compress_bytes_before / after
  int64_t after = 0;
};

Result SumWith(const std::string& opts, int world) {
  std::vector<Result> out(world);
  auto results = comm_testing::RunGlooRanks(world, [&](int rank, Communicator& comm) -> absl::Status {
    CommGroups groups;
    groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
    std::vector<float> params(kSize, 0.f), grads(kSize);
    for (int64_t i = 0; i < kSize; ++i) {
      grads[i] = std::sin(0.1f * i + rank) * (1 + (i % 97)) * 1e-2f + 1e-3f * rank;
    }
    ASSIGN_OR_RETURN(SyncOptions so, ParseSyncOptions("allreduce", opts));
    RETURN_IF_ERROR(ValidateSyncOptions(so));
    so.bucket_cap_mb = 0.004;
    SyncEnv env;
    env.comms = &groups;
    env.params = params.data();
    env.grads = grads.data();
    env.size = kSize;
    env.ready_ranges = kRanges;
    env.make_optimizer = [](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
      ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(r, optim::SgdOptions{}));
      return std::unique_ptr<optim::Optimizer>(std::move(s));
    };
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateGradientSync(so, std::move(env)));
    RETURN_IF_ERROR(sync->BeginStep({}));
    for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
    optim::StepContext ctx;
    ctx.step = 1;
    ctx.lr = 0.f;  // keep the summed gradients to look at
    RETURN_IF_ERROR(sync->FinishStep(ctx));
    out[rank].grads = grads;
    out[rank].before = sync->stats().compress_bytes_before;
    out[rank].after = sync->stats().compress_bytes_after;
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  for (int r = 1; r < world; ++r) EXPECT_EQ(out[r].grads, out[0].grads) << "rank " << r;
  return out[0];
}

TEST(AllreduceWire, HalfPrecisionMatchesTheFp32Ring) {
  for (int world : {2, 3}) {
    const Result fp32 = SumWith("", world);
    for (const auto& [wire, tolerance] : {std::pair<std::string, double>{"fp16", 1e-3},
                                          std::pair<std::string, double>{"bf16", 8e-3}}) {
      SCOPED_TRACE(absl::StrCat(wire, " at ", world));
      const Result half = SumWith("wire=" + wire, world);
      const double diff = sync_testing::RelativeDifference(half.grads, fp32.grads);
      EXPECT_LE(diff, tolerance);
      EXPECT_GT(diff, 0) << "the wire format really rounds";
      EXPECT_GT(half.after, 0);
      EXPECT_LE(2 * half.after, half.before + 64) << "half of fp32's bytes on the wire";
    }
    const Result explicit32 = SumWith("wire=fp32", world);
    EXPECT_EQ(explicit32.grads, fp32.grads);
  }
}

TEST(AllreduceWire, BadWireIsRefused) {
  absl::StatusOr<SyncOptions> so = ParseSyncOptions("allreduce", "wire=fp8");
  ASSERT_TRUE(so.ok());
  const absl::Status s = ValidateSyncOptions(*so);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "wire must be fp32, fp16 or bf16, got 'fp8'")) << s;
}

}  // namespace
}  // namespace sync
}  // namespace tandem
