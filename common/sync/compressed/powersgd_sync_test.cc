// compressed codec=powersgd on N Gloo ranks (a thread each), through the
// registry:
// - the synced gradients equal a codec-only reference (a single-process
//   implementation of the same math with plain loops: P = sum_r M_r Q,
//   Gram-Schmidt, Q = sum_r M_r^T P, P Q^T, residual M_r - P Q^T / N, Q
//   kept) within 1e-5, at N = 2 and 3, with and without error feedback,
//   small matrices and 1-D tensors summed uncompressed;
// - Q persists across steps: a reference that restarts Q from its seed
//   every step does not match;
// - the first warmup_steps steps equal `allreduce` bit for bit;
// - embedding tables (by name) go uncompressed unless embeddings=1, both
//   equal to the reference that skips / compresses them;
// - bad options give errors naming the key.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/codec/powersgd_math.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/compressed/powersgd_sync.h"
#include "common/sync/registry.h"
#include "common/sync/testing/synthetic_training.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int kR = 2;
constexpr uint64_t kSeed = 0x504f5745525347ull;  // PowerSgdSyncOptions::seed's default

// A model-like layout: W1 [24, 16], b1, W2 [10, 24], b2, a 3x3 weight too
// small to compress; two ready ranges (backward order, ascending memory).
std::vector<ParamShape> Shapes() {
  return {{0, {24, 16}}, {384, {24}}, {408, {10, 24}}, {648, {10}}, {658, {3, 3}}};
}
// The same with W2 named as an embedding table.
std::vector<ParamShape> ShapesWithEmbedding() {
  std::vector<ParamShape> s = Shapes();
  s[0].name = "h0.fc.weight";
  s[2].name = "embed.token";
  return s;
}
constexpr int64_t kSize = 667;
const std::vector<std::pair<int64_t, int64_t>> kRanges = {{0, 408}, {408, kSize}};

float Gradient(int rank, int step, int64_t i) {
  return std::sin(0.37f * i + 1.3f * step + 0.7f * rank) * (1 + 0.1f * rank) +
         0.05f * std::cos(0.011f * i * (step + 1));
}

// The env over flat vectors of kSize in kRanges; sgd without momentum.
SyncEnv Env(CommGroups* groups, std::vector<float>* params, std::vector<float>* grads,
            std::vector<ParamShape> shapes) {
  SyncEnv env;
  env.comms = groups;
  env.params = params->data();
  env.grads = grads->data();
  env.size = kSize;
  env.ready_ranges = kRanges;
  env.param_shapes = std::move(shapes);
  env.make_optimizer = [](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    optim::SgdOptions o;
    o.momentum = 0;
    ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(r, o));
    return std::unique_ptr<optim::Optimizer>(std::move(s));
  };
  return env;
}

// Runs `steps` steps of `strategy`/`opts` at `world`; returns each step's
// parameters (sgd, lr 1, no momentum, from zero: -sum of the averaged
// gradients), rank 0's, after checking every rank holds the same bits.
std::vector<std::vector<float>> RunSync(const std::string& strategy, const std::string& opts,
                                        int world, int steps,
                                        const std::vector<ParamShape>& shapes = Shapes()) {
  std::vector<std::vector<std::vector<float>>> out(world);
  auto results = comm_testing::RunGlooRanks(world, [&](int rank, Communicator& comm) -> absl::Status {
    CommGroups groups;
    groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
    std::vector<float> params(kSize, 0.f), grads(kSize, 0.f);
    ASSIGN_OR_RETURN(SyncOptions so, ParseSyncOptions(strategy, opts));
    so.bucket_cap_mb = 0.001;  // each range its own bucket
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync,
                     CreateGradientSync(so, Env(&groups, &params, &grads, shapes)));
    for (int step = 0; step < steps; ++step) {
      for (int64_t i = 0; i < kSize; ++i) grads[i] = Gradient(rank, step, i);
      RETURN_IF_ERROR(sync->BeginStep({}));
      for (auto it = kRanges.rbegin(); it != kRanges.rend(); ++it) {
        sync->OnGradientsReady(it->first, it->second);
      }
      optim::StepContext ctx;
      ctx.step = step + 1;
      ctx.lr = 1.f;
      RETURN_IF_ERROR(sync->FinishStep(ctx));
      out[rank].push_back(params);
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  for (int r = 1; r < world; ++r) EXPECT_EQ(out[r], out[0]) << "rank " << r << " agrees";
  return out[0];
}

// The same math, one process, plain loops in double.
struct Reference {
  int world = 2;
  int warmup = 1;
  bool ef = true;
  bool warm_start = true;
  std::vector<ParamShape> shapes = Shapes();
  bool compress_embeddings = false;

  std::vector<std::vector<float>> Run(int steps) const {
    std::vector<std::vector<double>> q(shapes.size()), e(world * shapes.size());
    std::vector<double> params(kSize, 0);
    std::vector<std::vector<float>> out;
    for (int step = 0; step < steps; ++step) {
      std::vector<double> sum(kSize, 0);
      for (int r = 0; r < world; ++r) {
        for (int64_t i = 0; i < kSize; ++i) sum[i] += Gradient(r, step, i);
      }
      for (size_t t = 0; t < shapes.size() && step >= warmup; ++t) {
        const codec::MatrixView v = codec::ViewAsMatrix(shapes[t].shape);
        if (!codec::PowerSgdCompresses(v, kR, 2)) continue;
        if (!compress_embeddings && IsEmbeddingName(shapes[t].name)) continue;
        if (q[t].empty() || !warm_start) q[t] = InitialQ(shapes[t].offset, v.cols);
        Compress(shapes[t].offset, v, step, &q[t], &e, t, shapes.size(), &sum);
      }
      for (int64_t i = 0; i < kSize; ++i) params[i] -= sum[i] / world;
      out.emplace_back(params.begin(), params.end());
    }
    return out;
  }

  static std::vector<double> InitialQ(int64_t offset, int64_t cols) {
    std::vector<float> f(kR * cols);
    codec::FillStandardNormal(kSeed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(offset + 1),
                              f.data(), f.size());
    return std::vector<double>(f.begin(), f.end());
  }

  // Matrix t at `lo`: sum[lo, lo + rows cols) becomes P Q^T.
  void Compress(int64_t lo, codec::MatrixView v, int step, std::vector<double>* q,
                std::vector<std::vector<double>>* e, size_t t, size_t nt,
                std::vector<double>* sum) const {
    const int64_t n = v.rows * v.cols;
    std::vector<std::vector<double>> m(world, std::vector<double>(n));
    for (int r = 0; r < world; ++r) {
      std::vector<double>& res = (*e)[r * nt + t];
      if (res.empty()) res.assign(n, 0);
      for (int64_t i = 0; i < n; ++i) m[r][i] = Gradient(r, step, lo + i) + (ef ? res[i] : 0);
    }
    std::vector<double> pt(kR * v.rows, 0), qt(kR * v.cols, 0);
    for (int r = 0; r < world; ++r) {
      for (int c = 0; c < kR; ++c) {
        for (int64_t i = 0; i < v.rows; ++i) {
          for (int64_t j = 0; j < v.cols; ++j) pt[c * v.rows + i] += m[r][i * v.cols + j] * (*q)[c * v.cols + j];
        }
      }
    }
    for (int c = 0; c < kR; ++c) {  // Gram-Schmidt
      double* row = &pt[c * v.rows];
      double norm = 0;
      for (int64_t i = 0; i < v.rows; ++i) norm += row[i] * row[i];
      for (int64_t i = 0; i < v.rows; ++i) row[i] /= std::sqrt(norm) + 1e-8;
      for (int d = c + 1; d < kR; ++d) {
        double* other = &pt[d * v.rows];
        double dot = 0;
        for (int64_t i = 0; i < v.rows; ++i) dot += row[i] * other[i];
        for (int64_t i = 0; i < v.rows; ++i) other[i] -= dot * row[i];
      }
    }
    for (int r = 0; r < world; ++r) {
      for (int c = 0; c < kR; ++c) {
        for (int64_t j = 0; j < v.cols; ++j) {
          for (int64_t i = 0; i < v.rows; ++i) qt[c * v.cols + j] += pt[c * v.rows + i] * m[r][i * v.cols + j];
        }
      }
    }
    *q = qt;
    for (int64_t i = 0; i < v.rows; ++i) {
      for (int64_t j = 0; j < v.cols; ++j) {
        double approx = 0;
        for (int c = 0; c < kR; ++c) approx += pt[c * v.rows + i] * qt[c * v.cols + j];
        (*sum)[lo + i * v.cols + j] = approx;
        for (int r = 0; r < world && ef; ++r) {
          (*e)[r * nt + t][i * v.cols + j] = m[r][i * v.cols + j] - approx / world;
        }
      }
    }
  }
};

double WorstStep(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t s = 0; s < a.size() && s < b.size(); ++s) {
    worst = std::max(worst, sync_testing::RelativeDifference(a[s], b[s]));
  }
  return worst;
}

TEST(PowerSgdSync, EqualsTheCodecOnlyReference) {
  constexpr int kSteps = 6;
  for (int world : {2, 3}) {
    for (bool ef : {true, false}) {
      SCOPED_TRACE(absl::StrCat("world ", world, " ef ", ef));
      const auto got = RunSync(
          "compressed", absl::StrCat("codec=powersgd,rank=2,warmup_steps=1,ef=", ef ? 1 : 0),
          world, kSteps);
      const Reference ref{world, 1, ef, true};
      EXPECT_LE(WorstStep(got, ref.Run(kSteps)), 1e-5);
      // Q carried from step to step matters: restarting it does not match.
      const Reference cold{world, 1, ef, false};
      EXPECT_GT(WorstStep(got, cold.Run(kSteps)), 1e-3) << "Q is warm-started";
    }
  }
}

TEST(PowerSgdSync, CompressionActuallyApproximates) {
  // Rank 2 of these matrices is not exact: the result differs from allreduce.
  const auto psgd = RunSync("compressed", "codec=powersgd,rank=2,warmup_steps=0", 2, 2);
  const auto ring = RunSync("allreduce", "", 2, 2);
  EXPECT_GT(sync_testing::RelativeDifference(psgd[0], ring[0]), 1e-2);
}

TEST(PowerSgdSync, WarmupStepsEqualAllreduceExactly) {
  const auto psgd = RunSync("compressed", "codec=powersgd,rank=2,warmup_steps=3", 3, 4);
  const auto ring = RunSync("allreduce", "", 3, 4);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(psgd[s], ring[s]) << "step " << s + 1;
  EXPECT_NE(psgd[3], ring[3]) << "step 4 is compressed";
}

TEST(PowerSgdSync, EmbeddingsGoUncompressedUnlessAsked) {
  constexpr int kSteps = 4;
  const std::vector<ParamShape> shapes = ShapesWithEmbedding();
  const auto ring = RunSync("allreduce", "", 2, kSteps, shapes);
  const auto plain = RunSync("compressed", "codec=powersgd,rank=2,warmup_steps=1", 2, kSteps, shapes);
  EXPECT_LE(WorstStep(plain, Reference{2, 1, true, true, shapes, false}.Run(kSteps)), 1e-5);
  // W2 ([408, 648)) is the ring's sum; W1 ([0, 384)) is compressed.
  const auto part = [](const std::vector<float>& v, int64_t lo, int64_t hi) {
    return std::vector<float>(v.begin() + lo, v.begin() + hi);
  };
  const int last = kSteps - 1;
  EXPECT_LE(sync_testing::RelativeDifference(part(plain[last], 408, 648), part(ring[last], 408, 648)),
            1e-6);
  EXPECT_GT(sync_testing::RelativeDifference(part(plain[last], 0, 384), part(ring[last], 0, 384)),
            1e-2);
  const auto all = RunSync("compressed", "codec=powersgd,rank=2,warmup_steps=1,embeddings=1", 2,
                           kSteps, shapes);
  EXPECT_LE(WorstStep(all, Reference{2, 1, true, true, shapes, true}.Run(kSteps)), 1e-5);
  EXPECT_GT(sync_testing::RelativeDifference(part(all[last], 408, 648), part(ring[last], 408, 648)),
            1e-2);
}

TEST(PowerSgdSync, IsEmbeddingName) {
  for (const char* yes : {"embed.token", "embed.position", "transformer.wte.weight", "wpe",
                          "model.Embedding.weight", "tok_embeddings.weight"}) {
    EXPECT_TRUE(IsEmbeddingName(yes)) << yes;
  }
  for (const char* no : {"", "h0.attn.qkv.weight", "head.weight", "emb.weight", "wtel"}) {
    EXPECT_FALSE(IsEmbeddingName(no)) << no;
  }
}

absl::Status Create(const std::string& opts, std::vector<ParamShape> shapes = Shapes()) {
  std::vector<absl::Status> results = comm_testing::RunGlooRanks(1, [&](int, Communicator& comm) {
    CommGroups groups;
    groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
    std::vector<float> params(kSize), grads(kSize);
    absl::StatusOr<SyncOptions> so = ParseSyncOptions("compressed", opts);
    if (!so.ok()) return so.status();
    return CreateGradientSync(*so, Env(&groups, &params, &grads, shapes)).status();
  });
  return results[0];
}

TEST(PowerSgdSync, BadOptionsNameTheKey) {
  EXPECT_TRUE(Create("codec=powersgd").ok()) << Create("codec=powersgd");
  struct Bad {
    std::string opts;
    std::string says;
  };
  for (const Bad& b : {Bad{"codec=powersgd,rank=0", "rank"},
                       Bad{"codec=powersgd,rank=-1", "rank"},
                       Bad{"codec=powersgd,rank=7", "choose rank between 1 and"},
                       Bad{"codec=powersgd,rnak=2", "rnak"},
                       Bad{"codec=powersgd,rank=two", "rank"},
                       Bad{"codec=powersgd,min_compression=0.5", "min_compression"},
                       Bad{"codec=powersgd,k=0.1", "k applies to codec=topk"},
                       Bad{"codec=powersgd,hier=1", "hier does not apply"},
                       Bad{"codec=powersgd,momentum_correction=1", "momentum_correction"},
                       Bad{"codec=int8,rank=2", "rank applies to codec=powersgd"},
                       Bad{"codec=powersgd,warmup_steps=-1", "warmup_steps"}}) {
    const absl::Status s = Create(b.opts);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.opts << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), b.says)) << b.opts << ": " << s;
  }
  const absl::Status none = Create("codec=powersgd", {});
  EXPECT_TRUE(absl::StrContains(none.message(), "parameter shapes")) << none;
  const absl::Status tiny = Create("codec=powersgd,rank=1", {{0, {3, 3}}, {9, {kSize - 9}}});
  EXPECT_TRUE(absl::StrContains(tiny.message(), "no weight of this model")) << tiny;
  // Only an embedding table is large enough: refused unless embeddings=1.
  const std::vector<ParamShape> only = {{0, {24, 16}, "embed.token"}, {384, {kSize - 384}}};
  const absl::Status emb = Create("codec=powersgd,rank=2", only);
  EXPECT_TRUE(absl::StrContains(emb.message(), "embeddings=0")) << emb;
  EXPECT_TRUE(Create("codec=powersgd,rank=2,embeddings=1", only).ok());
  EXPECT_FALSE(Create("codec=powersgd,embeddings=2").ok());
}

}  // namespace
}  // namespace sync
}  // namespace tandem
