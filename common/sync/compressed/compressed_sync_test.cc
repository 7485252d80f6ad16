// CompressedSync on N Gloo ranks (a thread each, one in-memory store):
// - the summed gradients equal a reference built from the codecs alone
//   (dequantize every rank's slice, sum in fp32 in rank order, re-encode,
//   decode; sparse: decode-add every rank's block) bit for bit, at N = 1..4,
//   for every codec, with and without error feedback, over several steps
//   (residuals carried), for ragged bucket sizes (1, odd, not a multiple of
//   the chunk, fewer values than ranks); every rank ends with the same bits;
// - hier=1 on nodes of 2 ranks equals the reference that sums each node
//   first and exchanges node shares, bit for bit, and sends less across
//   nodes than the flat exchange;
// - warm-up steps and buckets below min_bucket_kb are plain allreduces;
// - the compression stats (ratio ~4 for int8, residual norm);
// (momentum_correction: compressed_momentum_test.cc);
// - bad --sync_opt values through the registry give errors naming the key.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/codec/codec_factory.h"
#include "common/codec/error_feedback.h"
#include "common/codec/threshold_controller.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket/bucket_plan.h"
#include "common/sync/compressed/compressed_sync.h"
#include "common/sync/compressed/compressed_test_util.h"
#include "common/sync/registry.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using compressed_testing::Case;
using compressed_testing::Config;
using compressed_testing::Gradient;
using compressed_testing::kCapMb;
using compressed_testing::Name;
using compressed_testing::RaggedRanges;
using compressed_testing::RunSteps;
using compressed_testing::VectorOptions;

using codec::Codec;
using codec::CodecConfig;
using codec::CreateCodec;
using codec::EncodeParams;
using codec::ErrorFeedback;
using codec::ThresholdController;
using codec::ThresholdControllerOptions;

// What every rank must hold after each step, from the codecs alone. With
// `local` > 1 (hier=1, ranks r = node * local + local_rank): each node's
// fp32 sum, cut into `local` shares, share l exchanged among the ranks of
// local rank l of every node.
std::vector<std::vector<float>> Reference(const Case& c, int steps, int64_t n,
                                          const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                          int local = 1) {
  const int W = c.world;
  std::unique_ptr<Codec> codec = *CreateCodec(Config(c));
  const BucketPlan plan = *PlanBuckets(ranges, n, static_cast<int64_t>(kCapMb * (1 << 20)));
  std::vector<std::unique_ptr<ErrorFeedback>> ef, sum_ef;
  std::vector<std::unique_ptr<ThresholdController>> tc;
  for (int r = 0; r < W; ++r) {
    ef.push_back(std::make_unique<ErrorFeedback>(codec.get(), n));
    sum_ef.push_back(std::make_unique<ErrorFeedback>(codec.get(), n));
    tc.push_back(std::make_unique<ThresholdController>(static_cast<int>(plan.buckets.size()),
                                                       ThresholdControllerOptions{0.05}));
  }
  auto encode = [&](ErrorFeedback* e, const float* x, int64_t offset, int64_t len,
                    const EncodeParams& p, std::vector<uint8_t>* out) {
    out->assign(codec->MaxEncodedBytes(len) + 8, 0);
    if (c.ef) {
      e->Encode(x, offset, len, p, out->data());
    } else {
      codec->Encode(x, len, p, out->data());
    }
  };
  std::vector<std::vector<float>> result;
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<float>> g(W, std::vector<float>(n));
    for (int r = 0; r < W; ++r) {
      for (int64_t i = 0; i < n; ++i) g[r][i] = Gradient(r, step, i);
    }
    std::vector<float> out(n, 0.f);
    for (int b = 0; b < static_cast<int>(plan.buckets.size()); ++b) {
      const int64_t lo = plan.buckets[b].lo, len = plan.buckets[b].size();
      if (codec->sparse()) {
        std::vector<float> ws(codec->WorkspaceFloats(len));
        for (int r = 0; r < W; ++r) {
          EncodeParams p;
          p.workspace = ws.data();
          p.threshold = tc[r]->threshold(b);
          std::vector<uint8_t> block;
          encode(ef[r].get(), g[r].data() + lo, lo, len, p, &block);
          tc[r]->Update(b, block.data(), len);
          codec->DecodeAdd(block.data(), len, out.data() + lo);
        }
        continue;
      }
      const int K = local, G = W / local;
      const int64_t share = (len + K - 1) / K;
      for (int l = 0; l < K; ++l) {
        const int64_t x_lo = lo + l * share;
        const int64_t x_n = std::clamp<int64_t>(len - l * share, 0, share);
        // Each node's x: its ranks' sum, in local-rank order.
        std::vector<std::vector<float>> x(G);
        for (int node = 0; node < G; ++node) {
          const float* first = g[node * K].data() + x_lo;
          x[node].assign(first, first + x_n);
          for (int k = 1; k < K; ++k) {
            for (int64_t i = 0; i < x_n; ++i) x[node][i] += g[node * K + k][x_lo + i];
          }
        }
        // Slices of x: a stride from the full share; empty ones start at
        // x's end.
        const int64_t S = (share + G - 1) / G;
        for (int j = 0; j < G; ++j) {
          const int64_t at = std::min<int64_t>(j * S, x_n);
          const int64_t sl = std::clamp<int64_t>(x_n - j * S, 0, S), off = x_lo + at;
          std::vector<float> sum(sl, 0.f);
          for (int node = 0; node < G; ++node) {
            const int r = node * K + l;
            EncodeParams p;
            p.seed = CompressedSeed(step, b, r, j, 0);
            std::vector<uint8_t> block;
            encode(ef[r].get(), x[node].data() + at, off, sl, p, &block);
            codec->DecodeAdd(block.data(), sl, sum.data());
          }
          const int owner = j * K + l;
          EncodeParams p;
          p.seed = CompressedSeed(step, b, owner, j, 1);
          std::vector<uint8_t> block;
          encode(sum_ef[owner].get(), sum.data(), off, sl, p, &block);
          codec->Decode(block.data(), sl, out.data() + off);
        }
      }
    }
    result.push_back(std::move(out));
  }
  return result;
}

class CompressedSum : public ::testing::TestWithParam<Case> {};

TEST_P(CompressedSum, EqualsDequantizeThenSumReference) {
  const Case c = GetParam();
  constexpr int kSteps = 3;
  int64_t n = 0;
  const auto ranges = RaggedRanges(&n);
  const auto reference = Reference(c, kSteps, n, ranges);
  std::vector<std::vector<std::vector<float>>> got(c.world);
  auto results = comm_testing::RunGlooRanks(c.world, [&](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> params(n, 0.f), grads(n);
    CompressedSyncOptions o = VectorOptions(&comm, params, grads, ranges);
    o.codec = Config(c);
    o.error_feedback = c.ef;
    ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, n}, optim::SgdOptions{}));
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateCompressedSync(std::move(o)));
    // lr 0: the gradients are what is checked.
    RETURN_IF_ERROR(RunSteps(
        *sync, ranges, kSteps, 0.f,
        [&](int step) { for (int64_t i = 0; i < n; ++i) grads[i] = Gradient(rank, step, i); },
        [&] { got[rank].push_back(grads); }));
    const SyncStats st = sync->stats();
    if (st.uncompressed_buckets != 0) return absl::InternalError("a bucket went uncompressed");
    if (st.compress_bytes_after <= 0 || st.compress_bytes_after >= st.compress_bytes_before) {
      return absl::InternalError(absl::StrCat("bytes after ", st.compress_bytes_after,
                                              " vs before ", st.compress_bytes_before));
    }
    if (c.ef != (st.residual_norm > 0)) {
      return absl::InternalError(absl::StrCat("residual norm ", st.residual_norm));
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < c.world; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << results[r];
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < c.world; ++r) {
      ASSERT_EQ(got[r][step].size(), static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[r][step][i], reference[step][i])
            << Name(c) << " step " << step << " rank " << r << " element " << i;
      }
    }
  }
  // The comparison means something: the codec did change the values.
  if (c.codec != "fp16" || c.world > 1) {
    double diff = 0;
    for (int64_t i = 0; i < n; ++i) {
      float exact = 0;
      for (int r = 0; r < c.world; ++r) exact += Gradient(r, 0, i);
      diff += std::fabs(exact - reference[0][i]);
    }
    EXPECT_GT(diff, 0) << "compression changed nothing";
  }
}

std::vector<Case> SumCases() {
  std::vector<Case> cases;
  for (int w : {1, 2, 3, 4}) {
    for (const char* codec : {"int8", "fp16", "bf16", "topk", "threshold"}) {
      cases.push_back({codec, true, w});
      if (w == 3) cases.push_back({codec, false, w});
    }
  }
  cases.push_back({"int8", true, 3, "stochastic"});
  cases.push_back({"int8", false, 2, "stochastic"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressedSum, ::testing::ValuesIn(SumCases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return Name(i.param); });

// hier=1: nodes of `local` ranks; the reference sums each node first.
struct HierCase {
  Case c;
  int local;
};

class HierarchicalSum : public ::testing::TestWithParam<HierCase> {};

// Trains `steps` steps of Gradient() through the strategy on
// RunGroupRanks' nodes; returns every rank's gradients per step and rank
// 0's stats.
struct GroupRun {
  std::vector<std::vector<std::vector<float>>> grads;  // [rank][step]
  SyncStats stats;
};
GroupRun RunOnNodes(const Case& c, int local, bool hierarchical, int steps, int64_t n,
                    const std::vector<std::pair<int64_t, int64_t>>& ranges, const std::string& tag) {
  std::vector<std::string> nodes;
  for (int r = 0; r < c.world; ++r) nodes.push_back(absl::StrCat("node", r / local));
  GroupRun out;
  out.grads.resize(c.world);
  const auto results = hier_testing::RunGroupRanks(
      nodes, /*node_groups=*/true, absl::StrCat("compressed_hier_", getpid(), "_", tag),
      [&](int rank, CommGroups& groups) -> absl::Status {
        std::vector<float> params(n, 0.f), grads(n);
        CompressedSyncOptions o = VectorOptions(groups.world.get(), params, grads, ranges);
        o.groups = &groups;
        o.hierarchical = hierarchical;
        o.codec = Config(c);
        o.error_feedback = c.ef;
        ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, n}, optim::SgdOptions{}));
        ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateCompressedSync(std::move(o)));
        RETURN_IF_ERROR(RunSteps(
            *sync, ranges, steps, 0.f,
            [&](int step) { for (int64_t i = 0; i < n; ++i) grads[i] = Gradient(rank, step, i); },
            [&] { out.grads[rank].push_back(grads); }));
        if (rank == 0) out.stats = sync->stats();
        return absl::OkStatus();
      });
  for (int r = 0; r < c.world; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << results[r];
  return out;
}

TEST_P(HierarchicalSum, EqualsNodeSumThenExchangeReference) {
  const HierCase h = GetParam();
  constexpr int kSteps = 3;
  int64_t n = 0;
  const auto ranges = RaggedRanges(&n);
  const auto reference = Reference(h.c, kSteps, n, ranges, h.local);
  const GroupRun hier = RunOnNodes(h.c, h.local, true, kSteps, n, ranges, Name(h.c) + "_h");
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < h.c.world; ++r) {
      ASSERT_EQ(hier.grads[r].size(), static_cast<size_t>(kSteps));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hier.grads[r][step][i], reference[step][i])
            << Name(h.c) << " step " << step << " rank " << r << " element " << i;
      }
    }
  }
  // The hierarchical reference is not the flat one (the check can fail),
  // and the exchange across nodes is about 1/local of the flat one's.
  const auto flat_reference = Reference(h.c, 1, n, ranges, 1);
  EXPECT_NE(flat_reference[0], reference[0]);
  const GroupRun flat = RunOnNodes(h.c, h.local, false, 1, n, ranges, Name(h.c) + "_f");
  ASSERT_GT(flat.stats.inter_node_bytes, 0);
  const double ratio = static_cast<double>(hier.stats.inter_node_bytes) / kSteps /
                       static_cast<double>(flat.stats.inter_node_bytes);
  std::printf("%s, %d per node: cross-node bytes hier / flat %.3f\n", Name(h.c).c_str(), h.local,
              ratio);
  EXPECT_LT(ratio, 0.75);
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, HierarchicalSum,
    ::testing::Values(HierCase{{"int8", true, 4}, 2}, HierCase{{"int8", true, 6}, 2},
                      HierCase{{"int8", false, 4}, 2}, HierCase{{"fp16", true, 4}, 2},
                      HierCase{{"int8", true, 4, "stochastic"}, 2}),
    [](const ::testing::TestParamInfo<HierCase>& i) {
      return absl::StrCat(Name(i.param.c), "_local", i.param.local);
    });

// Runs `steps` steps of integer gradients (exact in fp32 whichever order
// they are summed in) and returns rank 0's stats and last gradients.
struct Plain {
  SyncStats stats;
  std::vector<float> grads;
};
Plain RunIntegers(int world, int64_t warmup, double min_bucket_kb, int steps) {
  int64_t n = 0;
  const auto ranges = RaggedRanges(&n);
  Plain out;
  auto results = comm_testing::RunGlooRanks(world, [&](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> params(n, 0.f), grads(n);
    CompressedSyncOptions o = VectorOptions(&comm, params, grads, ranges);
    o.codec.codec = "int8";
    o.warmup_steps = warmup;
    o.min_bucket_kb = min_bucket_kb;
    ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, n}, optim::SgdOptions{}));
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateCompressedSync(std::move(o)));
    RETURN_IF_ERROR(RunSteps(*sync, ranges, steps, 0.f, [&](int step) {
      for (int64_t i = 0; i < n; ++i) grads[i] = comm_testing::ExactValue(rank, i + step);
    }));
    if (rank == 0) {
      out.stats = sync->stats();
      out.grads = grads;
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  return out;
}

bool IsExactSum(const Plain& p, int world, int step) {
  for (size_t i = 0; i < p.grads.size(); ++i) {
    float sum = 0;
    for (int r = 0; r < world; ++r) sum += comm_testing::ExactValue(r, i + step);
    if (p.grads[i] != sum) return false;
  }
  return !p.grads.empty();
}

TEST(CompressedSync, WarmupStepsAreUncompressed) {
  const int world = 3;
  const Plain two = RunIntegers(world, /*warmup=*/2, 0, 2);
  const int64_t buckets = two.stats.buckets / 2;
  ASSERT_GT(buckets, 1);
  EXPECT_EQ(two.stats.uncompressed_buckets, 2 * buckets);
  EXPECT_EQ(two.stats.compress_bytes_before, 0);
  EXPECT_TRUE(IsExactSum(two, world, 1)) << "warm-up is a plain fp32 allreduce";
  const Plain three = RunIntegers(world, 2, 0, 3);
  EXPECT_EQ(three.stats.uncompressed_buckets, 2 * buckets) << "step 3 is compressed";
  EXPECT_GT(three.stats.compress_bytes_before, 0);
  EXPECT_FALSE(IsExactSum(three, world, 2)) << "int8 of these values is not exact";
}

TEST(CompressedSync, SmallBucketsAreUncompressed) {
  const int world = 2;
  // Every bucket is below 100 KiB: all uncompressed, exact.
  const Plain all = RunIntegers(world, 0, 100, 2);
  EXPECT_EQ(all.stats.uncompressed_buckets, all.stats.buckets);
  EXPECT_TRUE(IsExactSum(all, world, 1));
  // 5 KiB: the 2049-value bucket (8 KiB) is compressed, the others not.
  const Plain some = RunIntegers(world, 0, 5, 1);
  EXPECT_EQ(some.stats.uncompressed_buckets, some.stats.buckets - 1);
  EXPECT_EQ(some.stats.compress_bytes_before, (2049 + 1025) * 4)
      << "the bucket and this rank's half of it, re-encoded";
}

TEST(CompressedSync, Int8RatioIsNearFour) {
  const Plain p = RunIntegers(2, 0, 0, 2);
  const double ratio =
      static_cast<double>(p.stats.compress_bytes_before) / p.stats.compress_bytes_after;
  EXPECT_GT(ratio, 3.9);
  EXPECT_LT(ratio, 4.0);
  EXPECT_GT(p.stats.residual_norm, 0);
  EXPECT_GT(p.stats.bytes_sent, 0);
}

// Through the registry: every bad value names its key.
TEST(CompressedStrategy, BadOptionsGiveClearErrors) {
  auto check = [](const std::string& sync_opt, const std::string& expect) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("compressed", sync_opt);
    ASSERT_TRUE(o.ok()) << o.status();
    absl::Status s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << sync_opt;
    EXPECT_NE(s.message().find(expect), std::string::npos) << sync_opt << ": " << s.message();
  };
  check("codec=int4", "codec must be one of int8 | fp16 | bf16 | topk | threshold | powersgd, got 'int4'");
  check("codec=int8,chunk=100", "chunk (int8 values per scale) must be in 256..2048");
  check("codec=int8,chunk=abc", "chunk='abc' is not an integer");
  check("codec=int8,rounding=up", "rounding must be nearest or stochastic");
  check("codec=topk,k=0", "k (fraction of values top-k keeps) must be in (0, 1]");
  check("codec=topk,k=2", "must be in (0, 1]");
  check("codec=int8,k=0.01", "k applies to codec=topk only, but codec=int8");
  check("codec=topk,chunk=512", "chunk applies to codec=int8 only");
  check("codec=threshold,density=0", "density");
  check("codec=threshold,density=0.1,max_density=0.05", "max_density must be in [density, 1]");
  check("ef=2", "ef must be 1 (error feedback) or 0 (none), got 2");
  check("warmup_steps=-1", "warmup_steps must be >= 0");
  check("min_bucket_kb=-3", "min_bucket_kb must be >= 0");
  check("hier=2", "hier must be 0 (exchange over every rank) or 1");
  check("codecs=int8", "is not an option of strategy 'compressed'");
  check("codec=int8,momentum_correction=1",
        "momentum_correction=1 needs a sparse codec: use codec=topk or codec=threshold (got "
        "codec=int8)");
  check("codec=fp16,momentum_correction=1", "needs a sparse codec");
  check("codec=topk,ef=0,momentum_correction=1",
        "momentum_correction=1 needs error feedback");
  check("codec=topk,momentum_correction=2", "momentum_correction must be 0");
  check("codec=topk,momentum_correction=0,masking=0", "masking applies to momentum_correction=1 only");
  check("codec=int8,masking=0", "masking applies to momentum_correction=1 only");
  check("codec=topk,momentum_correction=1,masking=2", "masking must be 1");
  for (const char* ok : {"", "codec=fp16", "codec=bf16,ef=0", "codec=int8,hier=1", "codec=topk,k=0.001",
                         "codec=threshold,density=0.02,max_density=0.1",
                         "codec=topk,momentum_correction=1,warmup_steps=10",
                         "codec=threshold,momentum_correction=1", "codec=topk,momentum_correction=0",
                         "codec=topk,momentum_correction=1,masking=0",
                         "codec=int8,chunk=2048,rounding=stochastic,warmup_steps=50,"
                         "min_bucket_kb=64,bucket_cap_mb=4"}) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("compressed", ok);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_TRUE(ValidateSyncOptions(*o).ok()) << ok << ": " << ValidateSyncOptions(*o);
  }
  absl::StatusOr<StrategyInfo> info = FindStrategy("compressed");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(NeedsNodeGroups(*info, SyncOptions{}));
  // momentum_correction=1 takes the SGD momentum over from the worker.
  // topk / threshold take it by default (their accurate configuration).
  EXPECT_TRUE(TakesMomentum(*info, *ParseSyncOptions("compressed", "codec=topk")));
  EXPECT_FALSE(TakesMomentum(*info, *ParseSyncOptions("compressed", "codec=topk,momentum_correction=0")));
  EXPECT_FALSE(TakesMomentum(*info, *ParseSyncOptions("compressed", "codec=topk,ef=0")));
  EXPECT_FALSE(TakesMomentum(*info, *ParseSyncOptions("compressed", "codec=int8")));
  EXPECT_TRUE(TakesMomentum(*info, *ParseSyncOptions("compressed", "codec=topk,momentum_correction=1")));
  EXPECT_FALSE(TakesMomentum(StrategyInfo{}, SyncOptions{}));
}

}  // namespace
}  // namespace sync
}  // namespace tandem
