// CudaBackend against CpuBackend, op by op, on identical seeded inputs with
// odd sizes (tails of grid-stride loops, partial column tiles, rows that do
// not fill a block). fp32 bounds: ~1e-5 relative, looser absolute bounds
// where the GPU sums in a different order (GEMM, column sums, LayerNorm
// backward). Skips without a device.
#include "common/kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kernels/cpu_backend.h"
#include "common/kernels/cuda/elementwise_kernels.h"
#include "common/kernels/cuda/gpu_test_util.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cuda {
namespace {

using kernels::Activation;
using kernels::Transpose;
using testing::Download;
using testing::ExpectAllClose;
using testing::MakeTwin;
using testing::RandomVector;
using testing::Twin;

constexpr double kRel = 1e-5;
constexpr double kAbs = 1e-6;

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_SKIP_WITHOUT_GPU();
    kernels::BackendOptions options;
    cpu_ = std::make_unique<kernels::CpuBackend>(options);
    absl::StatusOr<std::unique_ptr<CudaBackend>> gpu =
        CudaBackend::Create(options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    // A fault is reported by the op that caused it, not by the next one.
    gpu_->set_check_each_call(true);
  }

  template <typename T>
  Twin Make(const std::vector<T>& host) {
    Twin t;
    absl::Status s = MakeTwin(*cpu_, *gpu_, host, &t);
    EXPECT_TRUE(s.ok()) << s;
    return t;
  }
  Twin Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    return Make(RandomVector(n, seed, lo, hi));
  }

  // Compares the first n floats of a twin once both backends are done.
  void Compare(const Twin& t, int64_t n, double rel, double abs, const std::string& what) {
    testing::ExpectTwinClose(*cpu_, *gpu_, t, n, rel, abs, what);
  }

  std::unique_ptr<kernels::CpuBackend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

struct GemmShape {
  int m, n, k, pad;
};

TEST_F(CudaBackendTest, GemmAllTransposesAndShapes) {
  const GemmShape shapes[] = {{1, 1, 1, 0}, {37, 53, 29, 0}, {128, 96, 200, 3}};
  uint32_t seed = 1;
  for (const GemmShape& s : shapes) {
    for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
        const int a_rows = ta == Transpose::kNo ? s.m : s.k;
        const int a_cols = ta == Transpose::kNo ? s.k : s.m;
        const int b_rows = tb == Transpose::kNo ? s.k : s.n;
        const int b_cols = tb == Transpose::kNo ? s.n : s.k;
        const int lda = a_cols + s.pad, ldb = b_cols + s.pad, ldc = s.n + s.pad;
        Twin a = Random(int64_t{a_rows} * lda, seed++);
        Twin b = Random(int64_t{b_rows} * ldb, seed++);
        Twin c = Random(int64_t{s.m} * ldc, seed++);
        cpu_->Gemm(ta, tb, s.m, s.n, s.k, 1.5f, a.r(), lda, b.r(), ldb, 0.5f,
                   c.r(), ldc);
        gpu_->Gemm(ta, tb, s.m, s.n, s.k, 1.5f, a.d(), lda, b.d(), ldb, 0.5f,
                   c.d(), ldc);
        Compare(c, int64_t{s.m} * ldc, kRel, 1e-5 * std::sqrt(s.k) + 1e-6,
                absl::StrCat("gemm m=", s.m, " n=", s.n, " k=", s.k, " ta=",
                             ta == Transpose::kYes, " tb=",
                             tb == Transpose::kYes));
      }
    }
  }
}

TEST_F(CudaBackendTest, GemmStridedBatched) {
  const int m = 17, n = 33, k = 9, batch = 3;
  const int64_t sa = m * k + 5, sb = n * k + 7, sc = m * n + 2;
  for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
    Twin a = Random(sa * batch, 11);
    Twin b = Random(sb * batch, 12);
    Twin c = Random(sc * batch, 13);
    const int ldb = tb == Transpose::kNo ? n : k;
    cpu_->GemmStridedBatched(Transpose::kNo, tb, m, n, k, 1.0f, a.r(), k, sa,
                             b.r(), ldb, sb, 0.0f, c.r(), n, sc, batch);
    gpu_->GemmStridedBatched(Transpose::kNo, tb, m, n, k, 1.0f, a.d(), k, sa,
                             b.d(), ldb, sb, 0.0f, c.d(), n, sc, batch);
    // Only the matrices themselves: the gaps between them are untouched on
    // both sides and equal anyway.
    Compare(c, sc * batch, kRel, 1e-5, "strided batched gemm");
  }
}

TEST_F(CudaBackendTest, BiasActivationForwardAndBackward) {
  struct Shape {
    int rows, cols;
  };
  for (Shape s : {Shape{37, 129}, Shape{1000, 3}, Shape{1, 1}}) {
    for (Activation act :
         {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      for (bool with_bias : {true, false}) {
        const int64_t n = int64_t{s.rows} * s.cols;
        const std::string what =
            absl::StrCat("act ", static_cast<int>(act), " rows ", s.rows,
                         " cols ", s.cols, " bias ", with_bias);
        Twin bias = Random(s.cols, 21);
        Twin z = Random(n, 22, -3.0f, 3.0f);
        Twin y = Make(std::vector<float>(n, 0.0f));
        cpu_->BiasActivationForward(act, s.rows, s.cols,
                                    with_bias ? bias.r() : nullptr, z.r(),
                                    y.r());
        gpu_->BiasActivationForward(act, s.rows, s.cols,
                                    with_bias ? bias.d() : nullptr, z.d(),
                                    y.d());
        Compare(z, n, kRel, kAbs, "forward z " + what);
        Compare(y, n, kRel, kAbs, "forward y " + what);

        for (float beta : {0.0f, 1.0f}) {
          Twin dy = Random(n, 23);
          Twin dz = Make(std::vector<float>(n, 0.0f));
          Twin dbias = Random(s.cols, 24);
          cpu_->BiasActivationBackward(act, s.rows, s.cols, z.r(), dy.r(),
                                       dz.r(), with_bias ? dbias.r() : nullptr,
                                       beta);
          gpu_->BiasActivationBackward(act, s.rows, s.cols, z.d(), dy.d(),
                                       dz.d(), with_bias ? dbias.d() : nullptr,
                                       beta);
          Compare(dz, n, kRel, kAbs, "backward dz " + what);
          Compare(dbias, s.cols, kRel, 1e-4,
                  absl::StrCat("backward dbias beta ", beta, " ", what));
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, ActivationsAndBiasGrad) {
  const int64_t n = 4099;
  for (Activation act :
       {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
    Twin x = Random(n, 31, -4.0f, 4.0f);
    Twin y = Make(std::vector<float>(n, 0.0f));
    Twin dy = Random(n, 32);
    Twin dx = Make(std::vector<float>(n, 0.0f));
    cpu_->ActivationForward(act, n, x.r(), y.r());
    gpu_->ActivationForward(act, n, x.d(), y.d());
    cpu_->ActivationBackward(act, n, x.r(), dy.r(), dx.r());
    gpu_->ActivationBackward(act, n, x.d(), dy.d(), dx.d());
    Compare(y, n, kRel, kAbs, absl::StrCat("act fwd ", static_cast<int>(act)));
    Compare(dx, n, kRel, kAbs, absl::StrCat("act bwd ", static_cast<int>(act)));
  }
  const int rows = 1000, cols = 33;
  for (float beta : {0.0f, 1.0f}) {
    Twin dy = Random(int64_t{rows} * cols, 33);
    Twin dbias = Random(cols, 34);
    cpu_->BiasGrad(rows, cols, dy.r(), beta, dbias.r());
    gpu_->BiasGrad(rows, cols, dy.d(), beta, dbias.d());
    Compare(dbias, cols, kRel, 1e-4, absl::StrCat("bias grad beta ", beta));
    Compare(dy, int64_t{rows} * cols, 0.0, 0.0, "bias grad leaves dy alone");
  }
}

TEST_F(CudaBackendTest, LayerNormForwardAndBackward) {
  const int rows = 67;
  for (int cols : {1, 301, 768}) {
    const int64_t n = int64_t{rows} * cols;
    const std::string what = absl::StrCat("cols ", cols);
    Twin x = Random(n, 41, -2.0f, 4.0f);
    Twin gamma = Random(cols, 42, 0.5f, 1.5f);
    Twin beta = Random(cols, 43);
    Twin y = Make(std::vector<float>(n, 0.0f));
    Twin mean = Make(std::vector<float>(rows, 0.0f));
    Twin rstd = Make(std::vector<float>(rows, 0.0f));
    cpu_->LayerNormForward(rows, cols, 1e-5f, x.r(), gamma.r(), beta.r(),
                           y.r(), mean.r(), rstd.r());
    gpu_->LayerNormForward(rows, cols, 1e-5f, x.d(), gamma.d(), beta.d(),
                           y.d(), mean.d(), rstd.d());
    Compare(y, n, 1e-4, 1e-5, "ln y " + what);
    Compare(mean, rows, 1e-5, 1e-6, "ln mean " + what);
    Compare(rstd, rows, 1e-4, 1e-6, "ln rstd " + what);
    for (float grad_beta : {0.0f, 1.0f}) {
      Twin dy = Random(n, 44);
      Twin dx = Make(std::vector<float>(n, 0.0f));
      Twin dgamma = Random(cols, 45);
      Twin dbeta = Random(cols, 46);
      cpu_->LayerNormBackward(rows, cols, x.r(), gamma.r(), mean.r(), rstd.r(),
                              dy.r(), dx.r(), dgamma.r(), dbeta.r(),
                              grad_beta);
      gpu_->LayerNormBackward(rows, cols, x.d(), gamma.d(), mean.d(), rstd.d(),
                              dy.d(), dx.d(), dgamma.d(), dbeta.d(),
                              grad_beta);
      const std::string w2 = absl::StrCat(what, " grad_beta ", grad_beta);
      Compare(dx, n, 1e-4, 1e-5, "ln dx " + w2);
      Compare(dgamma, cols, 1e-4, 1e-4, "ln dgamma " + w2);
      Compare(dbeta, cols, 1e-4, 1e-4, "ln dbeta " + w2);
    }
  }
}

TEST_F(CudaBackendTest, SoftmaxCrossEntropyForwardBackwardArgmax) {
  struct Shape {
    int rows, classes;
  };
  for (Shape s : {Shape{50, 10}, Shape{7, 1001}, Shape{1, 1}}) {
    const int64_t n = int64_t{s.rows} * s.classes;
    const std::string what = absl::StrCat(s.rows, "x", s.classes);
    std::vector<int32_t> labels(s.rows);
    for (int r = 0; r < s.rows; ++r) {
      labels[r] = r % 5 == 3 ? -1 : (r * 7919) % s.classes;
    }
    Twin lab = Make(labels);
    Twin logits = Random(n, 51, -5.0f, 5.0f);
    Twin probs = Make(std::vector<float>(n, 0.0f));
    Twin loss = Make(std::vector<float>{123.0f});
    const float scale = 1.0f / s.rows;
    cpu_->SoftmaxCrossEntropyForward(s.rows, s.classes, logits.r(), lab.ri(),
                                     scale, probs.r(), loss.r());
    gpu_->SoftmaxCrossEntropyForward(s.rows, s.classes, logits.d(), lab.di(),
                                     scale, probs.d(), loss.d());
    Compare(probs, n, kRel, kAbs, "softmax probs " + what);
    Compare(loss, 1, kRel, kAbs, "xent loss " + what);

    Twin dlogits = Make(std::vector<float>(n, 7.0f));
    cpu_->SoftmaxCrossEntropyBackward(s.rows, s.classes, probs.r(), lab.ri(),
                                      scale, dlogits.r());
    gpu_->SoftmaxCrossEntropyBackward(s.rows, s.classes, probs.d(), lab.di(),
                                      scale, dlogits.d());
    Compare(dlogits, n, kRel, kAbs, "xent dlogits " + what);

    // In place (probs aliasing logits) must give the same probabilities.
    cpu_->SoftmaxCrossEntropyForward(s.rows, s.classes, logits.r(), lab.ri(),
                                     scale, logits.r(), loss.r());
    gpu_->SoftmaxCrossEntropyForward(s.rows, s.classes, logits.d(), lab.di(),
                                     scale, logits.d(), loss.d());
    Compare(logits, n, kRel, kAbs, "softmax in place " + what);
    Compare(loss, 1, kRel, kAbs, "xent loss in place " + what);
  }

  const int rows = 40, cols = 257;
  std::vector<float> x = RandomVector(int64_t{rows} * cols, 52);
  for (int c = 0; c < cols; ++c) x[c] = 1.0f;  // row 0: all tied -> 0
  x[cols + 5] = 9.0f;                          // row 1: tie at 5 and 200
  x[cols + 200] = 9.0f;
  Twin xt = Make(x);
  Twin out = Make(std::vector<int32_t>(rows, -7));
  cpu_->ArgmaxRows(rows, cols, xt.r(), out.ri());
  gpu_->ArgmaxRows(rows, cols, xt.d(), out.di());
  std::vector<int32_t> want, got;
  TANDEM_ASSERT_OK(Download(*cpu_, out.ri(), rows, &want));
  TANDEM_ASSERT_OK(Download(*gpu_, out.di(), rows, &got));
  EXPECT_EQ(got, want);
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], 5);
}

TEST_F(CudaBackendTest, EmbeddingForwardAndBackward) {
  const int batch = 3, seq = 17, dim = 65, vocab = 97;
  std::vector<int32_t> ids(batch * seq);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (i * 31 + 7) % 13;  // repeats
  ids[4] = vocab - 1;
  Twin id = Make(ids);
  Twin tok = Random(int64_t{vocab} * dim, 61);
  Twin pos = Random(int64_t{seq} * dim, 62);
  const int64_t n = int64_t{batch} * seq * dim;
  for (bool with_pos : {true, false}) {
    const std::string what = absl::StrCat("pos ", with_pos);
    Twin out = Make(std::vector<float>(n, 0.0f));
    cpu_->EmbeddingForward(batch, seq, dim, id.ri(), tok.r(),
                           with_pos ? pos.r() : nullptr, out.r());
    gpu_->EmbeddingForward(batch, seq, dim, id.di(), tok.d(),
                           with_pos ? pos.d() : nullptr, out.d());
    Compare(out, n, kRel, kAbs, "embedding fwd " + what);

    Twin dout = Random(n, 63);
    Twin dtok = Random(int64_t{vocab} * dim, 64);  // accumulates onto this
    Twin dpos = Random(int64_t{seq} * dim, 65);
    cpu_->EmbeddingBackward(batch, seq, dim, id.ri(), dout.r(), dtok.r(),
                            with_pos ? dpos.r() : nullptr);
    gpu_->EmbeddingBackward(batch, seq, dim, id.di(), dout.d(), dtok.d(),
                            with_pos ? dpos.d() : nullptr);
    Compare(dtok, int64_t{vocab} * dim, kRel, 1e-5, "embedding dtok " + what);
    Compare(dpos, int64_t{seq} * dim, kRel, 1e-5, "embedding dpos " + what);
  }
}

TEST_F(CudaBackendTest, SplitAndMergeHeads) {
  const int batch = 2, seq = 5, heads = 4, head_dim = 7;
  for (int n : {1, 3}) {
    const int64_t total = int64_t{batch} * seq * n * heads * head_dim;
    Twin x = Random(total, 71);
    Twin split = Make(std::vector<float>(total, 0.0f));
    Twin merged = Make(std::vector<float>(total, 0.0f));
    cpu_->SplitHeads(batch, seq, n, heads, head_dim, x.r(), split.r());
    gpu_->SplitHeads(batch, seq, n, heads, head_dim, x.d(), split.d());
    Compare(split, total, 0.0, 0.0, absl::StrCat("split n=", n));
    cpu_->MergeHeads(batch, seq, n, heads, head_dim, split.r(), merged.r());
    gpu_->MergeHeads(batch, seq, n, heads, head_dim, split.d(), merged.d());
    Compare(merged, total, 0.0, 0.0, absl::StrCat("merge n=", n));
    std::vector<float> orig, back;
    TANDEM_ASSERT_OK(Download(*gpu_, x.d(), total, &orig));
    TANDEM_ASSERT_OK(Download(*gpu_, merged.d(), total, &back));
    EXPECT_EQ(back, orig) << "merge(split(x)) != x for n=" << n;
  }
}

TEST_F(CudaBackendTest, CausalSoftmaxForwardAndBackward) {
  const int batch = 5;
  const float scale = 0.125f;
  for (int seq : {1, 33, 300}) {
    const int64_t n = int64_t{batch} * seq * seq;
    const std::string what = absl::StrCat("seq ", seq);
    Twin scores = Random(n, 81, -8.0f, 8.0f);
    Twin probs = Make(std::vector<float>(n, 5.0f));
    cpu_->CausalSoftmaxForward(batch, seq, scale, scores.r(), probs.r());
    gpu_->CausalSoftmaxForward(batch, seq, scale, scores.d(), probs.d());
    Compare(probs, n, kRel, kAbs, "causal fwd " + what);

    Twin dprobs = Random(n, 82);
    Twin dscores = Make(std::vector<float>(n, 5.0f));
    cpu_->CausalSoftmaxBackward(batch, seq, scale, probs.r(), dprobs.r(),
                                dscores.r());
    gpu_->CausalSoftmaxBackward(batch, seq, scale, probs.d(), dprobs.d(),
                                dscores.d());
    Compare(dscores, n, kRel, kAbs, "causal bwd " + what);

    // In place on both (probs aliasing scores, dscores aliasing dprobs).
    cpu_->CausalSoftmaxForward(batch, seq, scale, scores.r(), scores.r());
    gpu_->CausalSoftmaxForward(batch, seq, scale, scores.d(), scores.d());
    Compare(scores, n, kRel, kAbs, "causal fwd in place " + what);
    cpu_->CausalSoftmaxBackward(batch, seq, scale, probs.r(), dprobs.r(),
                                dprobs.r());
    gpu_->CausalSoftmaxBackward(batch, seq, scale, probs.d(), dprobs.d(),
                                dprobs.d());
    Compare(dprobs, n, kRel, kAbs, "causal bwd in place " + what);
  }
}

TEST_F(CudaBackendTest, VectorOpsAndReductions) {
  for (int64_t n : {int64_t{1}, int64_t{1000003}}) {
    const std::string what = absl::StrCat("n ", n);
    Twin x = Random(n, 91);
    Twin y = Random(n, 92);
    Twin out = Make(std::vector<float>(n, 0.0f));
    cpu_->Axpy(n, -0.75f, x.r(), y.r());
    gpu_->Axpy(n, -0.75f, x.d(), y.d());
    Compare(y, n, kRel, kAbs, "axpy " + what);
    cpu_->Add(n, x.r(), y.r(), out.r());
    gpu_->Add(n, x.d(), y.d(), out.d());
    Compare(out, n, kRel, kAbs, "add " + what);
    cpu_->Scale(n, 3.0f, out.r());
    gpu_->Scale(n, 3.0f, out.d());
    Compare(out, n, kRel, kAbs, "scale " + what);

    Twin result = Make(std::vector<float>{-1.0f});
    cpu_->SumSquares(n, out.r(), result.r());
    gpu_->SumSquares(n, out.d(), result.d());
    Compare(result, 1, 1e-6, 0.0, "sum squares " + what);

    cpu_->Fill(out.r(), n, 0.25f);
    gpu_->Fill(out.d(), n, 0.25f);
    Compare(out, n, 0.0, 0.0, "fill " + what);
  }
  const int64_t n = 100003;
  std::vector<float> v = RandomVector(n, 93);
  v[0] = std::numeric_limits<float>::infinity();
  v[77] = -std::numeric_limits<float>::infinity();
  v[n - 1] = std::numeric_limits<float>::quiet_NaN();
  v[5000] = std::numeric_limits<float>::max();  // finite
  Twin x = Make(v);
  Twin count = Make(std::vector<float>{-1.0f});
  cpu_->CountNonFinite(n, x.r(), count.r());
  gpu_->CountNonFinite(n, x.d(), count.d());
  std::vector<float> got;
  TANDEM_ASSERT_OK(Download(*gpu_, count.d(), 1, &got));
  EXPECT_EQ(got[0], 3.0f);
  Compare(count, 1, 0.0, 0.0, "count non-finite");
}

TEST_F(CudaBackendTest, CastsMatchBitForBit) {
  std::vector<float> v = RandomVector(5001, 101);
  uint32_t e = 0;
  for (float& x : v) x = std::ldexp(x, static_cast<int>(e++ % 61) - 30);
  const float specials[] = {0.0f, -0.0f, 1.0f, -2.5f, 1.00390625f,
                            1.01171875f, 65504.0f, 65520.0f, 1e-8f, 6e-8f,
                            3.0e38f, -3.4e38f, 1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (float s : specials) v.push_back(s);
  const int64_t n = v.size();
  Twin x = Make(v);
  Twin h = Make(std::vector<uint16_t>(n, 0));
  Twin back = Make(std::vector<float>(n, 0.0f));
  for (bool bf16 : {true, false}) {
    if (bf16) {
      cpu_->CastF32ToBf16(n, x.r(), h.ru());
      gpu_->CastF32ToBf16(n, x.d(), h.du());
    } else {
      cpu_->CastF32ToF16(n, x.r(), h.ru());
      gpu_->CastF32ToF16(n, x.d(), h.du());
    }
    std::vector<uint16_t> want, got;
    TANDEM_ASSERT_OK(Download(*cpu_, h.ru(), n, &want));
    TANDEM_ASSERT_OK(Download(*gpu_, h.du(), n, &got));
    int64_t mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (got[i] != want[i] && mismatches++ < 5) {
        ADD_FAILURE() << (bf16 ? "bf16" : "f16") << " cast of " << v[i]
                      << ": got 0x" << std::hex << got[i] << " want 0x"
                      << want[i] << std::dec;
      }
    }
    EXPECT_EQ(mismatches, 0);
    if (bf16) {
      cpu_->CastBf16ToF32(n, h.ru(), back.r());
      gpu_->CastBf16ToF32(n, h.du(), back.d());
    } else {
      cpu_->CastF16ToF32(n, h.ru(), back.r());
      gpu_->CastF16ToF32(n, h.du(), back.d());
    }
    Compare(back, n, 0.0, 0.0, bf16 ? "bf16 to f32" : "f16 to f32");
  }
}

TEST_F(CudaBackendTest, ErrorsSurfaceAtSynchronizeOnce) {
  Twin a = Random(16, 111);
  // lda = 1 < k = 4: cuBLAS refuses; the error waits for Synchronize().
  gpu_->Gemm(Transpose::kNo, Transpose::kNo, 4, 4, 4, 1.0f, a.d(), 1, a.d(), 4,
             0.0f, a.d(), 4);
  absl::Status s = gpu_->Synchronize();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gemm"), absl::string_view::npos) << s;
  EXPECT_TRUE(gpu_->Synchronize().ok()) << "the error is reported once";
}

// The gradient norm decides clipping on every rank: the same vector must give
// the same bits on every run and every backend (rank), which a reduction
// with floating-point atomics does not (its block order varies). Checked on
// the double sum, where a different order shows in the last bits, and on the
// float the backend returns.
TEST_F(CudaBackendTest, SumSquaresIsBitIdenticalAcrossRunsAndRanks) {
  absl::StatusOr<std::unique_ptr<CudaBackend>> other =
      CudaBackend::Create(kernels::BackendOptions());
  ASSERT_TRUE(other.ok()) << other.status();
  const int64_t n = (int64_t{1} << 24) + 77;  // a full grid and a ragged tail
  const std::vector<float> host = RandomVector(n, 2024, -3.0f, 3.0f);
  double want = 0;
  for (float v : host) want += static_cast<double>(v) * v;
  CudaBackend* ranks[2] = {gpu_.get(), other->get()};
  double first_double = 0;
  float first_float = 0;
  for (int r = 0; r < 2; ++r) {
    CudaBackend& be = *ranks[r];
    be.set_check_each_call(true);
    absl::StatusOr<kernels::DeviceBuffer> x = be.Allocate(n * sizeof(float));
    absl::StatusOr<kernels::DeviceBuffer> scratch =
        be.Allocate(SumSquaresScratchDoubles() * sizeof(double) + 16);
    ASSERT_TRUE(x.ok() && scratch.ok());
    TANDEM_ASSERT_OK(be.CopyToDevice(x->data(), host.data(), n * sizeof(float)));
    double* partial = static_cast<double*>(scratch->data());
    double* d_sum = partial + SumSquaresScratchDoubles();
    float* f_sum = reinterpret_cast<float*>(d_sum + 1);
    for (int run = 0; run < 10; ++run) {
      ASSERT_EQ(LaunchSumSquaresF64(n, x->f32(), partial, d_sum, be.stream()),
                cudaSuccess);
      be.SumSquares(n, x->f32(), f_sum);
      double got_double = 0;
      float got_float = 0;
      TANDEM_ASSERT_OK(be.CopyToHost(&got_double, d_sum, sizeof(double)));
      TANDEM_ASSERT_OK(be.CopyToHost(&got_float, f_sum, sizeof(float)));
      if (r == 0 && run == 0) {
        first_double = got_double;
        first_float = got_float;
        EXPECT_NEAR(got_double, want, 1e-9 * want);
        EXPECT_EQ(got_float, static_cast<float>(got_double));
      }
      EXPECT_EQ(std::memcmp(&got_double, &first_double, sizeof(double)), 0)
          << "rank " << r << " run " << run << ": " << got_double << " vs "
          << first_double;
      EXPECT_EQ(std::memcmp(&got_float, &first_float, sizeof(float)), 0)
          << "rank " << r << " run " << run;
    }
  }
  // Empty input: zero, not the previous call's partials.
  float zero = -1.0f;
  absl::StatusOr<kernels::DeviceBuffer> out = gpu_->Allocate(sizeof(float));
  ASSERT_TRUE(out.ok());
  gpu_->SumSquares(0, nullptr, out->f32());
  TANDEM_ASSERT_OK(gpu_->CopyToHost(&zero, out->data(), sizeof(float)));
  EXPECT_EQ(zero, 0.0f);
}

// CopyToDevice returns once the bytes are staged (pinned), not when the
// device has them: the source may be overwritten at once, copies larger than
// the staging ring are chunked, and kernels queued after see the new data.
TEST_F(CudaBackendTest, CopyToDeviceStagesSoTheSourceMayBeReused) {
  gpu_->set_check_each_call(false);  // the copies must really be left pending
  const int64_t big = 3 * CudaBackend::kStagingSlotBytes / sizeof(float) + 5;
  std::vector<float> host = RandomVector(big, 77);
  const std::vector<float> want_big = host;
  absl::StatusOr<kernels::DeviceBuffer> a = gpu_->Allocate(big * sizeof(float));
  ASSERT_TRUE(a.ok());
  // Keep the stream busy so the copies are still queued when we return.
  absl::StatusOr<kernels::DeviceBuffer> busy = gpu_->Allocate(size_t{256} << 20);
  ASSERT_TRUE(busy.ok());
  for (int i = 0; i < 20; ++i) gpu_->Fill(busy->f32(), (int64_t{256} << 20) / 4, 1.0f);
  TANDEM_ASSERT_OK(gpu_->CopyToDevice(a->data(), host.data(), big * sizeof(float)));
  std::fill(host.begin(), host.end(), -7.0f);  // reuse the source at once
  // Many small copies of changing values through one host buffer into one
  // device buffer, each followed by a stream-ordered device copy: every
  // snapshot must hold the value staged for it.
  const int kCopies = 8;
  absl::StatusOr<kernels::DeviceBuffer> one = gpu_->Allocate(1024 * sizeof(float));
  absl::StatusOr<kernels::DeviceBuffer> snaps =
      gpu_->Allocate(kCopies * 1024 * sizeof(float));
  ASSERT_TRUE(one.ok() && snaps.ok());
  std::vector<float> small(1024);
  for (int c = 0; c < kCopies; ++c) {
    std::fill(small.begin(), small.end(), static_cast<float>(c));
    TANDEM_ASSERT_OK(gpu_->CopyToDevice(one->data(), small.data(), 1024 * sizeof(float)));
    gpu_->Copy(snaps->f32() + c * 1024, one->data(), 1024 * sizeof(float));
  }
  std::vector<float> got_big, got_snaps;
  TANDEM_ASSERT_OK(Download(*gpu_, a->data(), big, &got_big));
  TANDEM_ASSERT_OK(Download(*gpu_, snaps->data(), kCopies * 1024, &got_snaps));
  EXPECT_TRUE(got_big == want_big) << "chunked staged copy differs";
  for (int c = 0; c < kCopies; ++c) {
    EXPECT_EQ(got_snaps[c * 1024], static_cast<float>(c)) << "copy " << c;
    EXPECT_EQ(got_snaps[c * 1024 + 1023], static_cast<float>(c)) << "copy " << c;
  }
}

TEST_F(CudaBackendTest, HugeAllocationIsResourceExhausted) {
  absl::StatusOr<kernels::DeviceBuffer> b = gpu_->Allocate(size_t{1} << 50);
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(b.status())) << b.status();
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
