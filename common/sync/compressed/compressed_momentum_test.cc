// CompressedSync with momentum_correction=1 (DGC: momentum correction and
// momentum factor masking) on N Gloo ranks (a thread each): topk at N = 2
// and 3, with and without warm-up, equals a single-process DGC reference
// (parameters and every rank's velocity), sent values have their velocity
// zeroed, warm-up is momentum SGD, and an optimizer with momentum / a
// dense codec / ef=0 is refused.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_factory.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket/bucket_plan.h"
#include "common/sync/compressed/compressed_sync.h"
#include "common/sync/compressed/compressed_test_util.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using codec::Codec;
using codec::CreateCodec;
using codec::EncodeParams;
using compressed_testing::Config;
using compressed_testing::Gradient;
using compressed_testing::kCapMb;
using compressed_testing::RaggedRanges;
using compressed_testing::RunSteps;
using compressed_testing::VectorOptions;


constexpr float kMomentum = 0.9f;
constexpr float kLr = 0.1f;

float StartParam(int64_t i) { return std::cos(0.7f * i); }

// Indices of the k largest |v[0, n)| (ties: lower index first): top-k's
// contract, written out without the codec.
std::vector<int64_t> LargestK(const float* v, int64_t n, int64_t k) {
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(),
                   [v](int64_t a, int64_t b) { return std::fabs(v[a]) > std::fabs(v[b]); });
  idx.resize(k);
  return idx;
}

// What one momentum-correction run must hold after `steps` steps: the
// parameters (the same on every rank) and every rank's velocity.
struct DgcState {
  std::vector<float> params;
  std::vector<std::vector<float>> velocity;  // [rank][i]
  std::vector<std::vector<char>> sent_last;  // [rank][i]: sent at the last step
};

// The DGC update in one process, straight from the paper: per rank
// u = m u + g, v = v + u; per bucket the top k of |v| are sent and their v
// and u zeroed; the sum of what was sent, averaged, is applied by plain
// SGD. The first `warmup` steps send u whole (allreduce) and mask nothing.
DgcState DgcReference(int world, int steps, int64_t warmup, int64_t n,
                      const std::vector<std::pair<int64_t, int64_t>>& ranges, bool mask = true) {
  std::unique_ptr<Codec> topk = *CreateCodec(Config({"topk", true, world}));
  const BucketPlan plan = *PlanBuckets(ranges, n, static_cast<int64_t>(kCapMb * (1 << 20)));
  DgcState st;
  st.params.resize(n);
  for (int64_t i = 0; i < n; ++i) st.params[i] = StartParam(i);
  st.velocity.assign(world, std::vector<float>(n, 0.f));
  std::vector<std::vector<float>> v(world, std::vector<float>(n, 0.f));
  for (int step = 0; step < steps; ++step) {
    st.sent_last.assign(world, std::vector<char>(n, 0));
    std::vector<float> sum(n, 0.f);
    for (int r = 0; r < world; ++r) {
      std::vector<float>& u = st.velocity[r];
      for (int64_t i = 0; i < n; ++i) u[i] = kMomentum * u[i] + Gradient(r, step, i);
      if (step < warmup) {
        for (int64_t i = 0; i < n; ++i) sum[i] += u[i];
        continue;
      }
      for (int64_t i = 0; i < n; ++i) v[r][i] += u[i];
      for (const Bucket& b : plan.buckets) {
        const int64_t k = (topk->MaxEncodedBytes(b.size()) - 8) / 8;
        for (int64_t j : LargestK(v[r].data() + b.lo, b.size(), k)) {
          const int64_t i = b.lo + j;
          sum[i] += v[r][i];
          v[r][i] = 0;
          if (mask) u[i] = 0;
          st.sent_last[r][i] = 1;
        }
      }
    }
    const float scale = static_cast<float>(1.0 / world);
    for (int64_t i = 0; i < n; ++i) st.params[i] -= kLr * (sum[i] * scale);
  }
  return st;
}

// `steps` steps of CompressedSync (topk 5%) on `world` ranks; rank 0's
// parameters and (through the checkpoint gather) every rank's velocity.
DgcState RunDgc(int world, int steps, int64_t warmup, bool momentum_correction, int64_t n,
                const std::vector<std::pair<int64_t, int64_t>>& ranges, bool mask = true) {
  DgcState out;
  out.velocity.resize(world);
  auto results = comm_testing::RunGlooRanks(world, [&](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> params(n), grads(n);
    for (int64_t i = 0; i < n; ++i) params[i] = StartParam(i);
    CompressedSyncOptions o = VectorOptions(&comm, params, grads, ranges);
    o.codec = Config({"topk", true, world});
    o.warmup_steps = warmup;
    o.momentum_correction = momentum_correction;
    o.momentum = kMomentum;
    o.momentum_masking = mask;
    optim::SgdOptions so;
    so.momentum = momentum_correction ? 0.f : kMomentum;  // the optimizer's, without correction
    ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, n}, so));
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateCompressedSync(std::move(o)));
    RETURN_IF_ERROR(RunSteps(*sync, ranges, steps, kLr, [&](int step) {
      for (int64_t i = 0; i < n; ++i) grads[i] = Gradient(rank, step, i);
    }));
    RETURN_IF_ERROR(sync->SyncStateToHost());
    if (rank != 0) return absl::OkStatus();
    out.params = params;
    for (const optim::StateBuffer& b : sync->extra_state()) {
      if (b.name != "compressed/velocity") continue;
      if (static_cast<int64_t>(b.data.size()) != 2 + world * n) {
        return absl::InternalError(absl::StrCat("velocity state of ", b.data.size(), " floats"));
      }
      for (int r = 0; r < world; ++r) {
        out.velocity[r].assign(b.data.begin() + 2 + r * n, b.data.begin() + 2 + (r + 1) * n);
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << results[r];
  return out;
}

struct DgcCase {
  int world;
  int64_t warmup;
  bool mask = true;
};

void PrintTo(const DgcCase& c, std::ostream* os) {
  *os << "world " << c.world << " warmup " << c.warmup << " mask " << c.mask;
}

class MomentumCorrection : public ::testing::TestWithParam<DgcCase> {};

TEST_P(MomentumCorrection, EqualsTheDgcReferenceAndDiffersFromMomentumAfterTheSum) {
  const DgcCase c = GetParam();
  constexpr int kSteps = 6;
  int64_t n = 0;
  const auto ranges = RaggedRanges(&n);
  const DgcState ref = DgcReference(c.world, kSteps, c.warmup, n, ranges, c.mask);
  const DgcState got = RunDgc(c.world, kSteps, c.warmup, true, n, ranges, c.mask);
  ASSERT_EQ(got.params.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got.params[i], ref.params[i], 1e-6) << "element " << i;
  }
  for (int r = 0; r < c.world; ++r) {
    ASSERT_EQ(got.velocity[r].size(), static_cast<size_t>(n)) << "rank " << r;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got.velocity[r][i], ref.velocity[r][i], 1e-6) << "rank " << r << " element " << i;
    }
  }
  // Without the correction (momentum in the optimizer, after the sum) the
  // parameters are elsewhere: the comparison above can fail.
  const DgcState plain = RunDgc(c.world, kSteps, c.warmup, false, n, ranges);
  double diff = 0;
  for (int64_t i = 0; i < n; ++i) diff = std::max<double>(diff, std::fabs(plain.params[i] - ref.params[i]));
  EXPECT_GT(diff, 1e-3);
  EXPECT_TRUE(plain.velocity[0].empty()) << "no velocity state without momentum_correction";
}

INSTANTIATE_TEST_SUITE_P(Ragged, MomentumCorrection,
                         ::testing::Values(DgcCase{2, 0}, DgcCase{3, 0}, DgcCase{2, 2},
                                           DgcCase{3, 2}, DgcCase{2, 0, false},
                                           DgcCase{3, 2, false}),
                         [](const ::testing::TestParamInfo<DgcCase>& i) {
                           return absl::StrCat("w", i.param.world, "_warmup", i.param.warmup,
                                               i.param.mask ? "" : "_nomask");
                         });

// Momentum factor masking: after one step (u = g), every value that was
// sent has u == 0 exactly and every other keeps u == g.
TEST(MomentumCorrection, SentValuesHaveTheirVelocityZeroed) {
  constexpr int kWorld = 2;
  int64_t n = 0;
  const auto ranges = RaggedRanges(&n);
  const DgcState ref = DgcReference(kWorld, 1, 0, n, ranges);
  const DgcState got = RunDgc(kWorld, 1, 0, true, n, ranges);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(got.velocity[r].size(), static_cast<size_t>(n));
    int64_t sent = 0, kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (ref.sent_last[r][i]) {
        ++sent;
        EXPECT_EQ(got.velocity[r][i], 0.f) << "rank " << r << " sent element " << i;
      } else {
        EXPECT_EQ(got.velocity[r][i], Gradient(r, 0, i)) << "rank " << r << " element " << i;
        if (Gradient(r, 0, i) != 0.f) ++kept;
      }
    }
    EXPECT_GT(sent, 0);
    EXPECT_GT(kept, n / 2) << "unsent values keep a nonzero velocity";
    EXPECT_LT(sent, n / 10);
  }
  // masking=0: every value keeps u = g, sent or not.
  const DgcState unmasked = RunDgc(kWorld, 1, 0, true, n, ranges, /*mask=*/false);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(unmasked.velocity[r].size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(unmasked.velocity[r][i], Gradient(r, 0, i)) << "rank " << r << " element " << i;
    }
  }
}

// During warm-up the strategy applies the momentum itself (u sent whole):
// the same parameters as momentum SGD on the averaged gradients.
TEST(MomentumCorrection, WarmupIsMomentumSgd) {
  constexpr int kWorld = 3, kSteps = 4;
  int64_t n = 0;
  const auto ranges = RaggedRanges(&n);
  const DgcState got = RunDgc(kWorld, kSteps, /*warmup=*/kSteps, true, n, ranges);
  std::vector<float> p(n), buf(n, 0.f);
  for (int64_t i = 0; i < n; ++i) p[i] = StartParam(i);
  for (int step = 0; step < kSteps; ++step) {
    for (int64_t i = 0; i < n; ++i) {
      double g = 0;
      for (int r = 0; r < kWorld; ++r) g += Gradient(r, step, i);
      buf[i] = kMomentum * buf[i] + static_cast<float>(g / kWorld);
      p[i] -= kLr * buf[i];
    }
  }
  ASSERT_EQ(got.params.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got.params[i], p[i], 1e-5) << "element " << i;
}

// The optimizer must not apply momentum a second time.
TEST(MomentumCorrection, RefusesAnOptimizerWithMomentumAndDenseCodecs) {
  auto make = [](const std::string& codec, bool ef, float optimizer_momentum) {
    absl::Status out;
    auto results = comm_testing::RunGlooRanks(1, [&](int, Communicator& comm) -> absl::Status {
      std::vector<float> params(8, 0.f), grads(8, 0.f);
      CompressedSyncOptions o = VectorOptions(&comm, params, grads, {{0, 8}});
      o.codec.codec = codec;
      o.error_feedback = ef;
      o.momentum_correction = true;
      o.momentum = 0.9f;
      optim::SgdOptions so;
      so.momentum = optimizer_momentum;
      ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, 8}, so));
      out = CreateCompressedSync(std::move(o)).status();
      return absl::OkStatus();
    });
    EXPECT_TRUE(results[0].ok()) << results[0];
    return out;
  };
  EXPECT_TRUE(make("topk", true, 0.f).ok()) << make("topk", true, 0.f);
  EXPECT_TRUE(make("threshold", true, 0.f).ok());
  absl::Status s = make("topk", true, 0.9f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("must be plain sgd"), std::string::npos) << s;
  s = make("int8", true, 0.f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs a sparse codec"), std::string::npos) << s;
  s = make("topk", false, 0.f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ef=0"), std::string::npos) << s;
}

}  // namespace
}  // namespace sync
}  // namespace tandem
