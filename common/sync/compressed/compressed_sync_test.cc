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
// - momentum_correction (topk, N = 2 and 3, with and without warm-up)
//   equals a single-process DGC reference (parameters and every rank's
//   velocity), sent values have their velocity zeroed, warm-up is momentum
//   SGD, and an optimizer with momentum / a dense codec / ef=0 is refused;
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
#include "common/sync/registry.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using codec::Codec;
using codec::CodecConfig;
using codec::CreateCodec;
using codec::EncodeParams;
using codec::ErrorFeedback;
using codec::ThresholdController;
using codec::ThresholdControllerOptions;

// Ranges in backward order: descending memory, ragged sizes.
std::vector<std::pair<int64_t, int64_t>> RaggedRanges(int64_t* size) {
  const std::vector<int64_t> sizes = {3, 1, 2049, 7, 300, 1000, 2};
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t hi = total;
  for (int64_t s : sizes) {
    ranges.push_back({hi - s, hi});
    hi -= s;
  }
  *size = total;
  return ranges;
}

constexpr double kCapMb = 0.004;  // ~1000 floats: several buckets, one of 2049 alone

float Gradient(int rank, int step, int64_t i) {
  // Different magnitudes per region so int8 chunks get different scales.
  const float v = std::sin(0.013f * i * (rank + 1) + step) * (1 + (i / 700) % 4);
  return v + 0.01f * rank;
}

struct Case {
  std::string codec;
  bool ef;
  int world;
  std::string rounding = "nearest";
};

std::string Name(const Case& c) {
  return absl::StrCat(c.codec, c.rounding == "stochastic" ? "_stochastic" : "", c.ef ? "_ef" : "",
                      "_w", c.world);
}

void PrintTo(const Case& c, std::ostream* os) { *os << Name(c); }

CodecConfig Config(const Case& c) {
  CodecConfig cc;
  cc.codec = c.codec;
  cc.chunk = 256;
  cc.k = 0.05;
  cc.density = 0.05;
  cc.rounding = c.rounding;
  return cc;
}

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

// The options every run here shares: the flat vectors, backward's ranges
// and the test's bucket cap; codec and the rest are the caller's.
CompressedSyncOptions VectorOptions(Communicator* comm, std::vector<float>& params,
                                    std::vector<float>& grads,
                                    const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  CompressedSyncOptions o;
  o.comm = comm;
  o.params = params.data();
  o.grads = grads.data();
  o.size = static_cast<int64_t>(params.size());
  o.ready_ranges = ranges;
  o.bucket_cap_mb = kCapMb;
  return o;
}

// Steps 1..steps: `fill(step)` writes the gradients (step from 0), every
// range is reported, FinishStep at learning rate `lr`; `after` runs after
// each step when given.
absl::Status RunSteps(GradientSync& sync, const std::vector<std::pair<int64_t, int64_t>>& ranges,
                      int steps, float lr, const std::function<void(int)>& fill,
                      const std::function<void()>& after = nullptr) {
  for (int step = 0; step < steps; ++step) {
    fill(step);
    RETURN_IF_ERROR(sync.BeginStep({}));
    for (const auto& [lo, hi] : ranges) sync.OnGradientsReady(lo, hi);
    optim::StepContext ctx;
    ctx.step = step + 1;
    ctx.lr = lr;
    RETURN_IF_ERROR(sync.FinishStep(ctx));
    if (after) after();
  }
  return absl::OkStatus();
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

// ---- momentum_correction (DGC: momentum correction + factor masking) ----

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
