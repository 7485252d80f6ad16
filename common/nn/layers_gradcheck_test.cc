// Gradient checks for every layer: the fp32 backward pass on the CPU backend
// against central finite differences of an independent double-precision
// reference forward (reference_testutil.h), at several shapes including odd
// ones. The scalar checked is L = sum(y * r) for a fixed random r, so dy = r.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/nn/activation.h"
#include "common/nn/attention.h"
#include "common/nn/embedding.h"
#include "common/nn/layer_norm.h"
#include "common/nn/linear.h"
#include "common/nn/reference_testutil.h"
#include "common/nn/softmax_cross_entropy.h"
#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

using kernels::Activation;
using ref::Vec;

std::vector<float> Random(size_t n, std::mt19937_64* rng, float scale = 1.f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(*rng);
  return v;
}

Vec ToDouble(const float* p, int64_t n) { return Vec(p, p + n); }

double Dot(const Vec& y, const std::vector<float>& r) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
  return s;
}

// A tensor whose analytic gradient is checked: its current values, and where
// the fp32 backward pass left its gradient.
struct Checked {
  std::string name;
  const float* value;
  const float* grad;
  int64_t size;
};

// For every tensor, compares grad[i] with the central difference of
// `loss(values)` (double), for all elements of small tensors and a random
// sample of larger ones.
void CheckGradients(const std::vector<Checked>& tensors,
                    const std::function<double(const std::vector<Vec>&)>& loss) {
  std::vector<Vec> vals;
  for (const Checked& t : tensors) vals.push_back(ToDouble(t.value, t.size));
  std::mt19937_64 rng(7);
  const double h = 1e-5;
  for (size_t ti = 0; ti < tensors.size(); ++ti) {
    const Checked& t = tensors[ti];
    std::vector<int64_t> idx;
    if (t.size <= 64) {
      for (int64_t i = 0; i < t.size; ++i) idx.push_back(i);
    } else {
      std::uniform_int_distribution<int64_t> pick(0, t.size - 1);
      for (int k = 0; k < 64; ++k) idx.push_back(pick(rng));
    }
    for (int64_t i : idx) {
      const double saved = vals[ti][i];
      vals[ti][i] = saved + h;
      const double lp = loss(vals);
      vals[ti][i] = saved - h;
      const double lm = loss(vals);
      vals[ti][i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      EXPECT_NEAR(t.grad[i], numeric, 2e-4 + 2e-3 * std::fabs(numeric))
          << t.name << "[" << i << "]";
    }
  }
}

TEST(LinearGradTest, MatchesFiniteDifferences) {
  struct Shape { int rows, in, out; };
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{4, 17, 3}}) {
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      SCOPED_TRACE(testing::Message() << s.rows << "x" << s.in << "->" << s.out
                                      << " act " << static_cast<int>(act));
      kernels::CpuBackend be;
      std::mt19937_64 rng(s.rows * 100 + s.in);
      Linear layer(s.in, s.out, act);
      tensor::ParameterLayout layout;
      layer.AddParams("fc", 0, &layout);
      auto storage = tensor::FlatStorage::Create(&be, layout);
      ASSERT_TRUE(storage.ok());
      ASSERT_TRUE(layer.Init(&be, *storage, s.rows + 2).ok());
      std::vector<float> w = Random(s.in * s.out, &rng), b = Random(s.out, &rng);
      std::copy(w.begin(), w.end(), layer.weight());
      std::copy(b.begin(), b.end(), layer.bias());
      std::vector<float> x = Random(s.rows * s.in, &rng);
      std::vector<float> r = Random(s.rows * s.out, &rng);
      ASSERT_TRUE(layer.Forward(x.data(), s.rows).ok());
      std::vector<float> dy = r, dx(x.size());
      // Accumulation: start from garbage-free ones and beta 1 to check the
      // "adds to" contract, then subtract.
      ASSERT_TRUE(layer.Backward(dy.data(), dx.data(), 0.f).ok());
      // Without an activation dy is left as is (GptModel passes its residual
      // gradient straight in).
      if (act == Activation::kNone) EXPECT_EQ(dy, r);
      const int iact = act == Activation::kNone ? 0 : act == Activation::kRelu ? 1 : 2;
      auto loss = [&](const std::vector<Vec>& v) {
        return Dot(ref::Linear(v[0], s.rows, s.in, s.out, v[1].data(),
                               v[2].data(), iact), r);
      };
      Vec y = ref::Linear(ToDouble(x.data(), x.size()), s.rows, s.in, s.out,
                          ToDouble(w.data(), w.size()).data(),
                          ToDouble(b.data(), b.size()).data(), iact);
      for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(layer.output()[i], y[i], 1e-5);
      CheckGradients({{"x", x.data(), dx.data(), (int64_t)x.size()},
                      {"w", layer.weight(), storage->grad(layer.weight_index()), (int64_t)w.size()},
                      {"b", layer.bias(), storage->grad(layer.bias_index()), (int64_t)b.size()}},
                     loss);
      // grad_beta = 1 adds the same gradient again.
      std::vector<float> dw_once(storage->grad(layer.weight_index()),
                                 storage->grad(layer.weight_index()) + w.size());
      dy = r;
      ASSERT_TRUE(layer.Backward(dy.data(), nullptr, 1.f).ok());
      for (size_t i = 0; i < w.size(); ++i) {
        EXPECT_NEAR(storage->grad(layer.weight_index())[i], 2 * dw_once[i], 1e-5);
      }
    }
  }
}

// A batch of few rows against a weight large enough for the CPU backend's
// small-M kernels (kernels/cpu_small_m_gemm.h: Y = X W^T and dX = dY W read
// W in place at M <= 128 and >= 128K weights), rows and widths off their
// tiles; at the baseline width the same layer runs on OpenBLAS.
TEST(LinearGradTest, SmallBatchLargeWeightMatchesFiniteDifferences) {
  const int rows = 7, in = 517, out = 259;  // 133,903 weights
  for (bool baseline : {false, true}) {
    SCOPED_TRACE(baseline ? "baseline width (OpenBLAS)" : "widest width");
    numeric::ForceBaselineVectorWidth(baseline);
    kernels::CpuBackend be;
    std::mt19937_64 rng(11);
    Linear layer(in, out, Activation::kRelu);
    tensor::ParameterLayout layout;
    layer.AddParams("fc", 0, &layout);
    auto storage = tensor::FlatStorage::Create(&be, layout);
    ASSERT_TRUE(storage.ok());
    ASSERT_TRUE(layer.Init(&be, *storage, rows).ok());
    std::vector<float> w = Random(in * out, &rng, 0.1f), b = Random(out, &rng, 0.1f);
    std::copy(w.begin(), w.end(), layer.weight());
    std::copy(b.begin(), b.end(), layer.bias());
    std::vector<float> x = Random(rows * in, &rng), r = Random(rows * out, &rng);
    ASSERT_TRUE(layer.Forward(x.data(), rows).ok());
    std::vector<float> dy = r, dx(x.size());
    ASSERT_TRUE(layer.Backward(dy.data(), dx.data(), 0.f).ok());
    const Vec y = ref::Linear(ToDouble(x.data(), x.size()), rows, in, out,
                              ToDouble(w.data(), w.size()).data(),
                              ToDouble(b.data(), b.size()).data(), 1);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(layer.output()[i], y[i], 1e-5) << i;
    auto loss = [&](const std::vector<Vec>& v) {
      return Dot(ref::Linear(v[0], rows, in, out, v[1].data(), v[2].data(), 1), r);
    };
    CheckGradients({{"x", x.data(), dx.data(), (int64_t)x.size()},
                    {"w", layer.weight(), storage->grad(layer.weight_index()), (int64_t)w.size()},
                    {"b", layer.bias(), storage->grad(layer.bias_index()), (int64_t)b.size()}},
                   loss);
  }
  numeric::ForceBaselineVectorWidth(false);
}

TEST(LinearGradTest, RejectsTooManyRowsAndBackwardFirst) {
  kernels::CpuBackend be;
  Linear layer(3, 2, Activation::kNone);
  tensor::ParameterLayout layout;
  layer.AddParams("fc", 0, &layout);
  auto storage = tensor::FlatStorage::Create(&be, layout);
  ASSERT_TRUE(layer.Init(&be, *storage, 4).ok());
  std::vector<float> dy(8);
  EXPECT_EQ(layer.Backward(dy.data(), nullptr, 0.f).code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<float> x(15);
  EXPECT_EQ(layer.Forward(x.data(), 5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Forward(x.data(), 0).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ActivationGradTest, ReluAndGelu) {
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    for (int n : {1, 13}) {
      kernels::CpuBackend be;
      std::mt19937_64 rng(n);
      ActivationLayer layer(act, n);
      ASSERT_TRUE(layer.Init(&be, 3).ok());
      std::vector<float> x = Random(3 * n, &rng, 3.f), r = Random(3 * n, &rng);
      ASSERT_TRUE(layer.Forward(x.data(), 3).ok());
      std::vector<float> dx(x.size());
      ASSERT_TRUE(layer.Backward(r.data(), dx.data()).ok());
      auto loss = [&](const std::vector<Vec>& v) {
        double s = 0;
        for (size_t i = 0; i < v[0].size(); ++i) {
          const double y = act == Activation::kRelu ? std::max(0.0, v[0][i]) : ref::Gelu(v[0][i]);
          s += y * r[i];
        }
        return s;
      };
      CheckGradients({{"x", x.data(), dx.data(), (int64_t)x.size()}}, loss);
    }
  }
}

TEST(LayerNormGradTest, MatchesFiniteDifferences) {
  struct Shape { int rows, cols; };
  for (Shape s : {Shape{1, 2}, Shape{3, 7}, Shape{5, 32}}) {
    kernels::CpuBackend be;
    std::mt19937_64 rng(s.cols);
    LayerNorm layer(s.cols);
    tensor::ParameterLayout layout;
    layer.AddParams("ln", 0, &layout);
    auto storage = tensor::FlatStorage::Create(&be, layout);
    ASSERT_TRUE(layer.Init(&be, *storage, s.rows).ok());
    float* g = storage->param(layer.gamma_index());
    float* b = storage->param(layer.beta_index());
    std::vector<float> gv = Random(s.cols, &rng), bv = Random(s.cols, &rng);
    for (int c = 0; c < s.cols; ++c) g[c] = 1.f + gv[c], b[c] = bv[c];
    std::vector<float> x = Random(s.rows * s.cols, &rng, 2.f);
    std::vector<float> r = Random(x.size(), &rng), dx(x.size());
    ASSERT_TRUE(layer.Forward(x.data(), s.rows).ok());
    ASSERT_TRUE(layer.Backward(r.data(), dx.data(), 0.f).ok());
    auto loss = [&](const std::vector<Vec>& v) {
      return Dot(ref::LayerNorm(v[0], s.rows, s.cols, v[1].data(), v[2].data()), r);
    };
    CheckGradients({{"x", x.data(), dx.data(), (int64_t)x.size()},
                    {"gamma", g, storage->grad(layer.gamma_index()), s.cols},
                    {"beta", b, storage->grad(layer.beta_index()), s.cols}},
                   loss);
  }
}

TEST(EmbeddingGradTest, TokenAndPositionScatterAdd) {
  const int vocab = 7, context = 5, width = 3, batch = 2, seq = 4;
  kernels::CpuBackend be;
  std::mt19937_64 rng(3);
  Embedding layer(vocab, context, width);
  tensor::ParameterLayout layout;
  layer.AddParams("embed", 0, &layout);
  auto storage = tensor::FlatStorage::Create(&be, layout);
  ASSERT_TRUE(layer.Init(&be, *storage, batch).ok());
  float* tok = storage->param(layer.token_index());
  float* pos = storage->param(layer.position_index());
  std::vector<float> tv = Random(vocab * width, &rng), pv = Random(context * width, &rng);
  std::copy(tv.begin(), tv.end(), tok);
  std::copy(pv.begin(), pv.end(), pos);
  std::vector<int32_t> ids = {3, 3, 0, 6, 1, 3, 5, 0};
  std::vector<float> r = Random(batch * seq * width, &rng);
  ASSERT_TRUE(layer.Forward(ids.data(), batch, seq).ok());
  // Garbage in the gradient must be overwritten with grad_beta = 0.
  storage->grad(layer.token_index())[0] = 1e6f;
  ASSERT_TRUE(layer.Backward(r.data(), 0.f).ok());
  auto loss = [&](const std::vector<Vec>& v) {
    return Dot(ref::Embedding(ids, batch, seq, width, v[0].data(), v[1].data()), r);
  };
  CheckGradients({{"token", tok, storage->grad(layer.token_index()), vocab * width},
                  {"position", pos, storage->grad(layer.position_index()), context * width}},
                 loss);
  EXPECT_EQ(layer.Forward(ids.data(), batch, context + 1).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AttentionGradTest, MatchesFiniteDifferences) {
  struct Shape { int batch, seq, width, heads; };
  // The fourth shape spans three causal blocks, the third one partial; the
  // last (head size 16) runs on the CPU backend's causal kernel where the
  // CPU has AVX-512: two 64-column panels, the second partial, and 6-row
  // tiles with a 5-row tail.
  for (Shape s : {Shape{1, 1, 2, 1}, Shape{2, 3, 6, 2}, Shape{1, 5, 12, 3},
                  Shape{2, 2 * kCausalBlock + 5, 4, 2}, Shape{1, kCausalBlock + 7, 32, 2}}) {
    SCOPED_TRACE(testing::Message() << "B" << s.batch << " T" << s.seq << " W"
                                    << s.width << " H" << s.heads);
    kernels::CpuBackend be;
    std::mt19937_64 rng(s.width);
    const int context = s.seq + 1;  // shorter sequences than the context work
    CausalSelfAttention layer(s.width, s.heads, context);
    tensor::ParameterLayout layout;
    layer.AddParams("attn", 0, &layout);
    auto storage = tensor::FlatStorage::Create(&be, layout);
    ASSERT_TRUE(layer.Init(&be, *storage, s.batch).ok());
    for (Linear* l : {&layer.qkv(), &layer.proj()}) {
      std::vector<float> w = Random(l->in() * l->out(), &rng, 0.7f);
      std::vector<float> b = Random(l->out(), &rng, 0.3f);
      std::copy(w.begin(), w.end(), l->weight());
      std::copy(b.begin(), b.end(), l->bias());
    }
    const int rows = s.batch * s.seq;
    std::vector<float> x = Random(rows * s.width, &rng);
    std::vector<float> r = Random(x.size(), &rng), dx(x.size());
    ASSERT_TRUE(layer.Forward(x.data(), s.batch, s.seq).ok());
    std::vector<float> dy = r;
    bool proj_ready = false;
    ASSERT_TRUE(layer.Backward(dy.data(), dx.data(), 0.f,
                               [&] { proj_ready = true; }).ok());
    EXPECT_TRUE(proj_ready);
    EXPECT_EQ(dy, r);  // read, not consumed
    auto loss = [&](const std::vector<Vec>& v) {
      return Dot(ref::Attention(v[0], s.batch, s.seq, s.width, s.heads,
                                v[1].data(), v[2].data(), v[3].data(), v[4].data()),
                 r);
    };
    Linear& q = layer.qkv();
    Linear& p = layer.proj();
    CheckGradients(
        {{"x", x.data(), dx.data(), (int64_t)x.size()},
         {"qkv.w", q.weight(), storage->grad(q.weight_index()), q.in() * q.out()},
         {"qkv.b", q.bias(), storage->grad(q.bias_index()), q.out()},
         {"proj.w", p.weight(), storage->grad(p.weight_index()), p.in() * p.out()},
         {"proj.b", p.bias(), storage->grad(p.bias_index()), p.out()}},
        loss);
  }
}

TEST(SoftmaxCrossEntropyGradTest, MatchesFiniteDifferencesWithIgnoredRows) {
  for (int classes : {2, 11}) {
    const int rows = 4;
    kernels::CpuBackend be;
    std::mt19937_64 rng(classes);
    SoftmaxCrossEntropy layer(classes);
    ASSERT_TRUE(layer.Init(&be, rows).ok());
    std::vector<float> logits = Random(rows * classes, &rng, 3.f);
    std::vector<int32_t> labels = {1, -1, 0, classes - 1};
    ASSERT_TRUE(layer.Forward(logits.data(), labels.data(), rows).ok());
    const double expect = ref::CrossEntropy(ToDouble(logits.data(), logits.size()),
                                            labels, rows, classes);
    EXPECT_NEAR(*layer.loss(), expect, 1e-5);
    ASSERT_TRUE(layer.Backward().ok());
    CheckGradients({{"logits", logits.data(), layer.dlogits(), rows * classes}},
                   [&](const std::vector<Vec>& v) {
                     return ref::CrossEntropy(v[0], labels, rows, classes);
                   });
  }
}

}  // namespace
}  // namespace nn
}  // namespace tandem
