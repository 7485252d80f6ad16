// Checks each CpuBackend kernel against a direct double-precision
// computation at odd shapes.
#include "common/kernels/cpu_backend.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace {

std::vector<float> Random(size_t n, uint64_t seed, float lo = -1.f,
                          float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(CpuBackendTest, GemmAllTransposesMatchNaive) {
  CpuBackend be;
  const int m = 5, n = 7, k = 3;
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
      std::vector<float> c = Random(m * n, 3), c0 = c;
      const int lda = ta == Transpose::kNo ? k : m;
      const int ldb = tb == Transpose::kNo ? n : k;
      be.Gemm(ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.f,
              c.data(), n);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p) {
            const double av = ta == Transpose::kNo ? a[i * k + p] : a[p * m + i];
            const double bv = tb == Transpose::kNo ? b[p * n + j] : b[j * k + p];
            s += av * bv;
          }
          EXPECT_NEAR(c[i * n + j], 0.5 * s + 2.0 * c0[i * n + j], 1e-5);
        }
      }
    }
  }
}

TEST(CpuBackendTest, StridedBatchedGemmIsPerBatchGemm) {
  CpuBackend be;
  const int m = 3, n = 2, k = 4, batch = 3;
  std::vector<float> a = Random(batch * m * k, 4), b = Random(batch * k * n, 5);
  std::vector<float> c(batch * m * n, -1.f), ref(m * n);
  be.GemmStridedBatched(Transpose::kNo, Transpose::kNo, m, n, k, 1.f, a.data(),
                        k, m * k, b.data(), n, k * n, 0.f, c.data(), n, m * n,
                        batch);
  for (int i = 0; i < batch; ++i) {
    be.Gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.f, a.data() + i * m * k,
            k, b.data() + i * k * n, n, 0.f, ref.data(), n);
    for (int j = 0; j < m * n; ++j) EXPECT_FLOAT_EQ(c[i * m * n + j], ref[j]);
  }
}

TEST(CpuBackendTest, BiasActivationForwardBackward) {
  CpuBackend be;
  const int rows = 3, cols = 5;
  std::vector<float> bias = Random(cols, 6);
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
    std::vector<float> z = Random(rows * cols, 7), z0 = z, y(rows * cols);
    be.BiasActivationForward(act, rows, cols, bias.data(), z.data(), y.data());
    std::vector<float> dy = Random(rows * cols, 8), dz(rows * cols);
    std::vector<float> db(cols, 100.f);
    be.BiasActivationBackward(act, rows, cols, z.data(), dy.data(), dz.data(),
                              db.data(), 0.f);
    std::vector<double> dbref(cols, 0.0);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const double x = double(z0[r * cols + c]) + bias[c];
        EXPECT_FLOAT_EQ(z[r * cols + c], float(x));
        double f, g;
        if (act == Activation::kNone) {
          f = x, g = 1;
        } else if (act == Activation::kRelu) {
          f = x > 0 ? x : 0, g = x > 0 ? 1 : 0;
        } else {
          const double h = 1e-4;
          auto gelu = [](double v) {
            return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
          };
          f = gelu(x);
          g = (gelu(x + h) - gelu(x - h)) / (2 * h);
        }
        EXPECT_NEAR(y[r * cols + c], f, 1e-5);
        EXPECT_NEAR(dz[r * cols + c], g * dy[r * cols + c], 1e-4);
        dbref[c] += g * dy[r * cols + c];
      }
    }
    for (int c = 0; c < cols; ++c) EXPECT_NEAR(db[c], dbref[c], 1e-4);
  }
}

// The layers call backward in place (dz == dy); the vectorised kernels have
// a separate loop for that, checked here against the out-of-place result at
// a width with a vector remainder, with and without bias, beta 0 and 1.
TEST(CpuBackendTest, ReluAndBiasBackwardInPlaceMatchesOutOfPlace) {
  CpuBackend be;
  const int rows = 5, cols = 37;
  for (Activation act : {Activation::kNone, Activation::kRelu}) {
    for (bool with_bias : {false, true}) {
      for (float beta : {0.f, 1.f}) {
        std::vector<float> z = Random(rows * cols, 21), dy = Random(rows * cols, 22);
        std::vector<float> dz(rows * cols, -7.f), db(cols, 0.5f), db2(cols, 0.5f);
        be.BiasActivationBackward(act, rows, cols, z.data(), dy.data(), dz.data(),
                                  with_bias ? db.data() : nullptr, beta);
        std::vector<float> inplace = dy;
        be.BiasActivationBackward(act, rows, cols, z.data(), inplace.data(), inplace.data(),
                                  with_bias ? db2.data() : nullptr, beta);
        std::vector<double> ref(cols, beta * 0.5);
        for (int i = 0; i < rows * cols; ++i) {
          const float want = act == Activation::kRelu && z[i] <= 0.f ? 0.f : dy[i];
          EXPECT_EQ(dz[i], want) << i;
          EXPECT_EQ(inplace[i], want) << i;
          ref[i % cols] += want;
        }
        for (int c = 0; c < cols; ++c) {
          EXPECT_NEAR(db[c], with_bias ? ref[c] : 0.5, 1e-5) << c;
          EXPECT_EQ(db2[c], db[c]) << c;
        }
      }
    }
  }
  // The stand-alone activation gradient, in place and not.
  std::vector<float> x = Random(1000, 23), dy = Random(1000, 24), dx(1000), inplace = dy;
  be.ActivationBackward(Activation::kRelu, 1000, x.data(), dy.data(), dx.data());
  be.ActivationBackward(Activation::kRelu, 1000, x.data(), inplace.data(), inplace.data());
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(dx[i], x[i] > 0.f ? dy[i] : 0.f) << i;
    EXPECT_EQ(inplace[i], dx[i]) << i;
  }
}

// Every dispatched element-wise loop gives the same bits at the baseline
// width as at AVX2 (sums keep their order; no contraction into FMAs that
// would round differently: checked here rather than assumed).
TEST(CpuBackendTest, WideAndBaselineVectorWidthsAgree) {
  CpuBackend be;
  for (int cols : {1, 7, 37, 130}) {
    const int rows = 3;
    std::vector<float> z0 = Random(rows * cols, 31), dy = Random(rows * cols, 32);
    std::vector<float> bias = Random(cols, 33);
    std::vector<float> y[3], dz[3], db[3], zf[3];
    const std::vector<numeric::VectorWidth> widths = numeric::SupportedVectorWidths();
      for (size_t wide = 0; wide < widths.size(); ++wide) {
      numeric::ForceVectorWidth(widths[wide]);
      zf[wide] = z0;
      y[wide].assign(rows * cols, 0.f);
      be.BiasActivationForward(Activation::kRelu, rows, cols, bias.data(), zf[wide].data(),
                               y[wide].data());
      dz[wide].assign(rows * cols, 0.f);
      db[wide].assign(cols, 0.25f);
      be.BiasActivationBackward(Activation::kRelu, rows, cols, zf[wide].data(), dy.data(),
                                dz[wide].data(), db[wide].data(), 1.f);
    }
    numeric::ForceBaselineVectorWidth(false);
    for (size_t w = 1; w < widths.size(); ++w) {
      const char* name = numeric::VectorWidthName(widths[w]);
      EXPECT_EQ(zf[0], zf[w]) << cols << " at " << name;
      EXPECT_EQ(y[0], y[w]) << cols << " at " << name;
      EXPECT_EQ(dz[0], dz[w]) << cols << " at " << name;
      for (int c = 0; c < cols; ++c) EXPECT_NEAR(db[0][c], db[w][c], 1e-6f) << cols << name;
    }
  }
}

// Forward with a bias and without, ReLU writing a separate y and kNone in
// place, at a width with a vector remainder.
TEST(CpuBackendTest, BiasReluForwardWideRows) {
  CpuBackend be;
  const int rows = 4, cols = 45;
  std::vector<float> bias = Random(cols, 25);
  for (bool with_bias : {false, true}) {
    std::vector<float> z = Random(rows * cols, 26), z0 = z, y(rows * cols, -1.f);
    be.BiasActivationForward(Activation::kRelu, rows, cols, with_bias ? bias.data() : nullptr,
                             z.data(), y.data());
    std::vector<float> n = z0;
    be.BiasActivationForward(Activation::kNone, rows, cols, with_bias ? bias.data() : nullptr,
                             n.data(), n.data());
    for (int i = 0; i < rows * cols; ++i) {
      const float pre = with_bias ? z0[i] + bias[i % cols] : z0[i];
      EXPECT_EQ(z[i], pre) << i;
      EXPECT_EQ(n[i], pre) << i;
      EXPECT_EQ(y[i], pre > 0.f ? pre : 0.f) << i;
    }
  }
}

TEST(CpuBackendTest, BiasGradAccumulatesWithBeta) {
  CpuBackend be;
  std::vector<float> dy = {1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<float> db = {10, 20, 30};
  be.BiasGrad(2, 3, dy.data(), 1.f, db.data());
  EXPECT_EQ(db, (std::vector<float>{15, 27, 39}));
  be.BiasGrad(2, 3, dy.data(), 0.f, db.data());
  EXPECT_EQ(db, (std::vector<float>{5, 7, 9}));
}

TEST(CpuBackendTest, LayerNormForwardNormalisesRows) {
  CpuBackend be;
  const int rows = 3, cols = 7;
  std::vector<float> x = Random(rows * cols, 9, -3, 5), g = Random(cols, 10);
  std::vector<float> b = Random(cols, 11), y(rows * cols), mean(rows), rstd(rows);
  be.LayerNormForward(rows, cols, 1e-5f, x.data(), g.data(), b.data(), y.data(),
                      mean.data(), rstd.data());
  for (int r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int c = 0; c < cols; ++c) mu += x[r * cols + c];
    mu /= cols;
    for (int c = 0; c < cols; ++c) var += std::pow(x[r * cols + c] - mu, 2);
    var /= cols;
    EXPECT_NEAR(mean[r], mu, 1e-5);
    EXPECT_NEAR(rstd[r], 1 / std::sqrt(var + 1e-5), 1e-4);
    for (int c = 0; c < cols; ++c) {
      EXPECT_NEAR(y[r * cols + c],
                  (x[r * cols + c] - mu) / std::sqrt(var + 1e-5) * g[c] + b[c], 1e-5);
    }
  }
}

TEST(CpuBackendTest, SoftmaxCrossEntropyWithIgnoredRows) {
  CpuBackend be;
  const int rows = 3, classes = 5;
  std::vector<float> logits = Random(rows * classes, 12, -4, 4), probs(rows * classes);
  std::vector<int32_t> labels = {2, -1, 4};
  float loss = 0;
  be.SoftmaxCrossEntropyForward(rows, classes, logits.data(), labels.data(),
                                0.5f, probs.data(), &loss);
  double ref = 0;
  for (int r = 0; r < rows; ++r) {
    double z = 0;
    for (int c = 0; c < classes; ++c) z += std::exp(double(logits[r * classes + c]));
    for (int c = 0; c < classes; ++c) {
      EXPECT_NEAR(probs[r * classes + c], std::exp(double(logits[r * classes + c])) / z, 1e-6);
    }
    if (labels[r] >= 0) ref += std::log(z) - logits[r * classes + labels[r]];
  }
  EXPECT_NEAR(loss, 0.5 * ref, 1e-5);
  std::vector<float> d(rows * classes);
  be.SoftmaxCrossEntropyBackward(rows, classes, probs.data(), labels.data(),
                                 0.5f, d.data());
  EXPECT_NEAR(d[0 * classes + 2], 0.5 * (probs[2] - 1), 1e-6);
  EXPECT_NEAR(d[0 * classes + 1], 0.5 * probs[1], 1e-6);
  for (int c = 0; c < classes; ++c) EXPECT_EQ(d[1 * classes + c], 0.f);
  std::vector<int32_t> arg(rows);
  be.ArgmaxRows(rows, classes, logits.data(), arg.data());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < classes; ++c) {
      EXPECT_LE(logits[r * classes + c], logits[r * classes + arg[r]]);
    }
  }
}

TEST(CpuBackendTest, SplitAndMergeHeadsAreInverse) {
  CpuBackend be;
  const int B = 2, T = 3, n = 3, H = 2, d = 5;
  std::vector<float> x = Random(B * T * n * H * d, 13), split(x.size()), back(x.size());
  be.SplitHeads(B, T, n, H, d, x.data(), split.data());
  // Element (b, t, i, h, e) lands at (i, b, h, t, e).
  const int b = 1, t = 2, i = 1, h = 0, e = 4;
  EXPECT_EQ(split[(((i * B + b) * H + h) * T + t) * d + e],
            x[(((b * T + t) * n + i) * H + h) * d + e]);
  be.MergeHeads(B, T, n, H, d, split.data(), back.data());
  EXPECT_EQ(back, x);
}

TEST(CpuBackendTest, CausalSoftmaxMasksTheFuture) {
  CpuBackend be;
  const int batch = 2, T = 4;
  std::vector<float> s = Random(batch * T * T, 14, -3, 3), p(s.size());
  be.CausalSoftmaxForward(batch, T, 0.7f, s.data(), p.data());
  for (int row = 0; row < batch * T; ++row) {
    const int i = row % T;
    double sum = 0, z = 0;
    for (int j = 0; j <= i; ++j) z += std::exp(0.7 * s[row * T + j]);
    for (int j = 0; j < T; ++j) {
      if (j > i) {
        EXPECT_EQ(p[row * T + j], 0.f);
      } else {
        EXPECT_NEAR(p[row * T + j], std::exp(0.7 * s[row * T + j]) / z, 1e-6);
      }
      sum += p[row * T + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(CpuBackendTest, EmbeddingGatherAndScatterAdd) {
  CpuBackend be;
  const int B = 2, T = 3, D = 4, V = 5;
  std::vector<float> tok = Random(V * D, 15), pos = Random(T * D, 16);
  std::vector<int32_t> ids = {1, 4, 1, 0, 1, 3};
  std::vector<float> out(B * T * D);
  be.EmbeddingForward(B, T, D, ids.data(), tok.data(), pos.data(), out.data());
  EXPECT_FLOAT_EQ(out[(1 * T + 2) * D + 3], tok[3 * D + 3] + pos[2 * D + 3]);
  std::vector<float> dout(B * T * D, 1.f), dtok(V * D, 0.f), dpos(T * D, 0.f);
  be.EmbeddingBackward(B, T, D, ids.data(), dout.data(), dtok.data(), dpos.data());
  EXPECT_EQ(dtok[1 * D], 3.f);  // token 1 appears three times
  EXPECT_EQ(dtok[2 * D], 0.f);
  EXPECT_EQ(dpos[0], 2.f);  // summed over the batch
}

TEST(CpuBackendTest, VectorOpsAndReductions) {
  CpuBackend be;
  std::vector<float> x = Random(10001, 17), y(10001, 1.f), out(10001);
  be.Axpy(x.size(), 2.f, x.data(), y.data());
  EXPECT_FLOAT_EQ(y[17], 1.f + 2.f * x[17]);
  be.Add(x.size(), x.data(), y.data(), out.data());
  EXPECT_FLOAT_EQ(out[5], x[5] + y[5]);
  be.Scale(x.size(), -3.f, out.data());
  EXPECT_FLOAT_EQ(out[5], -3.f * (x[5] + y[5]));
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  float result = 0;
  be.SumSquares(x.size(), x.data(), &result);
  EXPECT_NEAR(result, ss, 1e-5 * ss);  // fp32 partial sums
  x[3] = std::numeric_limits<float>::infinity();
  x[9] = std::numeric_limits<float>::quiet_NaN();
  be.CountNonFinite(x.size(), x.data(), &result);
  EXPECT_EQ(result, 2.f);
  be.Fill(out.data(), 3, 4.5f);
  EXPECT_EQ(out[2], 4.5f);
}

TEST(CpuBackendTest, HalfAndBfloatCastsRoundToNearestEven) {
  CpuBackend be;
  std::vector<float> x = {1.f, -2.5f, 65504.f, 65520.f, 1e-8f, 6.1035156e-05f,
                          std::numeric_limits<float>::infinity(), 3.14159f,
                          1.f + 1.f / 2048.f};  // tie -> even (1.0)
  std::vector<uint16_t> h(x.size());
  be.CastF32ToF16(x.size(), x.data(), h.data());
  EXPECT_EQ(h[0], 0x3c00);
  EXPECT_EQ(h[1], 0xc100);
  EXPECT_EQ(h[2], 0x7bff);
  EXPECT_EQ(h[3], 0x7c00);  // overflows to inf
  EXPECT_EQ(h[4], 0x0000);  // 1e-8 < half of the smallest subnormal
  EXPECT_EQ(h[5], 0x0400);  // smallest normal
  EXPECT_EQ(h[6], 0x7c00);
  EXPECT_EQ(h[8], 0x3c00);
  std::vector<float> back(x.size());
  be.CastF16ToF32(x.size(), h.data(), back.data());
  EXPECT_NEAR(back[7], 3.14159f, 2e-3);
  EXPECT_EQ(back[2], 65504.f);

  std::vector<uint16_t> bf(x.size());
  be.CastF32ToBf16(x.size(), x.data(), bf.data());
  EXPECT_EQ(bf[0], 0x3f80);
  be.CastBf16ToF32(x.size(), bf.data(), back.data());
  EXPECT_NEAR(back[7], 3.14159f, 2e-2);
  EXPECT_EQ(back[1], -2.5f);
}

namespace gelu_ref {
double Gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double GeluGrad(double x) {
  const double c = std::sqrt(2 / M_PI), u = c * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
}
}  // namespace gelu_ref

// True when |v| is 0 or a normal float: the exp-based kernels never hand
// denormals to the GEMMs after them.
bool NotDenormal(float v) { return v == 0.f || std::fabs(v) >= std::numeric_limits<float>::min(); }

// The vectorised GELU (sigmoid form over ExpApprox) against the tanh form in
// double, over its whole range including saturation, at every vector width:
// stand-alone (in place and not), fused with a bias, and the gradients.
TEST(CpuBackendTest, GeluMatchesDoubleReferenceAtEveryWidth) {
  CpuBackend be;
  const int n = 2 * 1200 + 37;  // more than one staging block, odd tail
  std::vector<float> x(n), dy = Random(n, 40);
  for (int i = 0; i < n; ++i) x[i] = -30.f + 60.f * i / (n - 1);
  for (numeric::VectorWidth w : numeric::SupportedVectorWidths()) {
    numeric::ForceVectorWidth(w);
    std::vector<float> y(n), inplace = x, dx(n), dinplace = dy;
    be.ActivationForward(Activation::kGelu, n, x.data(), y.data());
    be.ActivationForward(Activation::kGelu, n, inplace.data(), inplace.data());
    be.ActivationBackward(Activation::kGelu, n, x.data(), dy.data(), dx.data());
    be.ActivationBackward(Activation::kGelu, n, x.data(), dinplace.data(), dinplace.data());
    for (int i = 0; i < n; ++i) {
      const double ref = gelu_ref::Gelu(x[i]), gref = dy[i] * gelu_ref::GeluGrad(x[i]);
      ASSERT_NEAR(y[i], ref, 2e-6 + 2e-6 * std::fabs(ref)) << x[i] << " at " << numeric::VectorWidthName(w);
      ASSERT_NEAR(dx[i], gref, 4e-6 + 4e-6 * std::fabs(gref)) << x[i] << " at " << numeric::VectorWidthName(w);
      ASSERT_EQ(inplace[i], y[i]);
      ASSERT_EQ(dinplace[i], dx[i]);
      ASSERT_TRUE(NotDenormal(y[i]) && NotDenormal(dx[i])) << x[i];
    }
    // Fused with a bias over rows; the bias gradient is the column sum.
    const int rows = 3, cols = 37;
    std::vector<float> bias = Random(cols, 41), z = Random(rows * cols, 42, -4, 4), z0 = z;
    std::vector<float> fy(rows * cols), g = Random(rows * cols, 43), dz(rows * cols);
    std::vector<float> db(cols, 1.f);
    be.BiasActivationForward(Activation::kGelu, rows, cols, bias.data(), z.data(), fy.data());
    be.BiasActivationBackward(Activation::kGelu, rows, cols, z.data(), g.data(), dz.data(),
                              db.data(), 0.5f);
    for (int c = 0; c < cols; ++c) {
      double col = 0;
      for (int r = 0; r < rows; ++r) {
        const int i = r * cols + c;
        const double pre = static_cast<double>(z0[i]) + bias[c];
        EXPECT_NEAR(z[i], pre, 1e-6);
        EXPECT_NEAR(fy[i], gelu_ref::Gelu(pre), 1e-5);
        EXPECT_NEAR(dz[i], g[i] * gelu_ref::GeluGrad(pre), 1e-5);
        col += dz[i];
      }
      EXPECT_NEAR(db[c], 0.5 + col, 1e-5);
    }
  }
  numeric::ForceBaselineVectorWidth(false);
}

// Softmax rows with a spread far beyond exp's range: the far entries are
// exactly 0 (not denormal) and the loss matches double precision.
TEST(CpuBackendTest, SoftmaxCrossEntropyFlushesTinyProbabilities) {
  CpuBackend be;
  const int rows = 2, classes = 70;
  std::vector<float> logits = Random(rows * classes, 44, -200, 5), probs(rows * classes);
  std::vector<int32_t> labels = {3, 69};
  float loss = 0;
  for (numeric::VectorWidth w : numeric::SupportedVectorWidths()) {
    numeric::ForceVectorWidth(w);
    be.SoftmaxCrossEntropyForward(rows, classes, logits.data(), labels.data(), 0.5f,
                                  probs.data(), &loss);
    double total = 0;
    for (int r = 0; r < rows; ++r) {
      const float* l = logits.data() + r * classes;
      double mx = -1e300, z = 0;
      for (int c = 0; c < classes; ++c) mx = std::max<double>(mx, l[c]);
      for (int c = 0; c < classes; ++c) z += std::exp(l[c] - mx);
      total += std::log(z) - (l[labels[r]] - mx);
      for (int c = 0; c < classes; ++c) {
        const float p = probs[r * classes + c];
        EXPECT_TRUE(NotDenormal(p)) << p;
        EXPECT_NEAR(p, std::exp(l[c] - mx) / z, 1e-6);
      }
    }
    EXPECT_NEAR(loss, 0.5 * total, 1e-4 * total);
  }
  numeric::ForceBaselineVectorWidth(false);
}

// Causal softmax forward and backward at a length with full 16-lane blocks
// and a tail, in place and not, at every width, against double precision.
TEST(CpuBackendTest, CausalSoftmaxForwardBackwardAtEveryWidth) {
  CpuBackend be;
  const int batch = 2, T = 37;
  const float scale = 0.3f;
  std::vector<float> s = Random(batch * T * T, 45, -5, 5), dp = Random(batch * T * T, 46);
  for (numeric::VectorWidth w : numeric::SupportedVectorWidths()) {
    numeric::ForceVectorWidth(w);
    std::vector<float> p(s.size()), inplace = s, ds(s.size()), dinplace = dp;
    be.CausalSoftmaxForward(batch, T, scale, s.data(), p.data());
    be.CausalSoftmaxForward(batch, T, scale, inplace.data(), inplace.data());
    be.CausalSoftmaxBackward(batch, T, scale, p.data(), dp.data(), ds.data());
    be.CausalSoftmaxBackward(batch, T, scale, p.data(), dinplace.data(), dinplace.data());
    EXPECT_EQ(p, inplace);
    EXPECT_EQ(ds, dinplace);
    for (int row = 0; row < batch * T; ++row) {
      const int i = row % T;
      const float* sr = s.data() + row * T;
      double z = 0, dot = 0;
      for (int j = 0; j <= i; ++j) z += std::exp(scale * sr[j]);
      for (int j = 0; j <= i; ++j) dot += dp[row * T + j] * std::exp(scale * sr[j]) / z;
      for (int j = 0; j < T; ++j) {
        const double pr = j <= i ? std::exp(scale * sr[j]) / z : 0.0;
        const double dr = j <= i ? scale * pr * (dp[row * T + j] - dot) : 0.0;
        EXPECT_NEAR(p[row * T + j], pr, 1e-6) << row << "," << j;
        EXPECT_NEAR(ds[row * T + j], dr, 1e-6) << row << "," << j;
      }
    }
  }
  numeric::ForceBaselineVectorWidth(false);
}

// LayerNorm forward and backward at widths with and without a 16-lane
// tail, at every vector width, against double precision.
TEST(CpuBackendTest, LayerNormForwardBackwardAtEveryWidth) {
  CpuBackend be;
  for (int cols : {5, 37, 256}) {
    const int rows = 3;
    std::vector<float> x = Random(rows * cols, 47, -2, 3), g = Random(cols, 48);
    std::vector<float> b = Random(cols, 49), dy = Random(rows * cols, 50);
    for (numeric::VectorWidth w : numeric::SupportedVectorWidths()) {
      numeric::ForceVectorWidth(w);
      std::vector<float> y(rows * cols), mean(rows), rstd(rows), dx(rows * cols);
      std::vector<float> dg(cols, 1.f), db(cols, 1.f);
      be.LayerNormForward(rows, cols, 1e-5f, x.data(), g.data(), b.data(), y.data(),
                          mean.data(), rstd.data());
      be.LayerNormBackward(rows, cols, x.data(), g.data(), mean.data(), rstd.data(), dy.data(),
                           dx.data(), dg.data(), db.data(), 1.f);
      std::vector<double> rdg(cols, 1.0), rdb(cols, 1.0);
      for (int r = 0; r < rows; ++r) {
        const float* xr = x.data() + r * cols;
        const float* dyr = dy.data() + r * cols;
        double mu = 0, var = 0;
        for (int c = 0; c < cols; ++c) mu += xr[c];
        mu /= cols;
        for (int c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
        const double rs = 1 / std::sqrt(var / cols + 1e-5);
        double mg = 0, mgx = 0;
        for (int c = 0; c < cols; ++c) {
          const double xh = (xr[c] - mu) * rs;
          EXPECT_NEAR(y[r * cols + c], xh * g[c] + b[c], 2e-5);
          mg += dyr[c] * g[c] / cols;
          mgx += dyr[c] * g[c] * xh / cols;
          rdg[c] += dyr[c] * xh;
          rdb[c] += dyr[c];
        }
        for (int c = 0; c < cols; ++c) {
          const double xh = (xr[c] - mu) * rs;
          EXPECT_NEAR(dx[r * cols + c], rs * (dyr[c] * g[c] - mg - xh * mgx), 5e-5);
        }
      }
      for (int c = 0; c < cols; ++c) {
        EXPECT_NEAR(dg[c], rdg[c], 2e-5);
        EXPECT_NEAR(db[c], rdb[c], 2e-5);
      }
    }
  }
  numeric::ForceBaselineVectorWidth(false);
}

}  // namespace
}  // namespace kernels
}  // namespace tandem
