// Double-precision reference forward passes of tandem's layers and models,
// written independently of the Backend (plain loops, no fusion), for the
// gradient checks: finite differences of these give the "true" gradients
// that the fp32 backward passes are compared with. Test-only.
#ifndef TANDEM_COMMON_NN_REFERENCE_TESTUTIL_H_
#define TANDEM_COMMON_NN_REFERENCE_TESTUTIL_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tandem {
namespace nn {
namespace ref {

using Vec = std::vector<double>;

inline double Gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// act: 0 none, 1 relu, 2 gelu. W [out, in], b [out] or null.
inline Vec Linear(const Vec& x, int rows, int in, int out, const double* w,
                  const double* b, int act) {
  Vec y(static_cast<size_t>(rows) * out);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = b ? b[o] : 0.0;
      for (int i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      if (act == 1) s = s > 0 ? s : 0;
      if (act == 2) s = Gelu(s);
      y[r * out + o] = s;
    }
  }
  return y;
}

inline Vec LayerNorm(const Vec& x, int rows, int cols, const double* g,
                     const double* b, double eps = 1e-5) {
  Vec y(x.size());
  for (int r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int c = 0; c < cols; ++c) mu += x[r * cols + c];
    mu /= cols;
    for (int c = 0; c < cols; ++c) var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
    var /= cols;
    for (int c = 0; c < cols; ++c) {
      y[r * cols + c] = (x[r * cols + c] - mu) / std::sqrt(var + eps) * g[c] + b[c];
    }
  }
  return y;
}

inline Vec Embedding(const std::vector<int32_t>& ids, int batch, int seq,
                     int dim, const double* tok, const double* pos) {
  Vec y(static_cast<size_t>(batch) * seq * dim);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int c = 0; c < dim; ++c)
        y[(b * seq + t) * dim + c] = tok[ids[b * seq + t] * dim + c] + pos[t * dim + c];
  return y;
}

// Causal multi-head self-attention on x [batch, seq, width].
inline Vec Attention(const Vec& x, int batch, int seq, int width, int heads,
                     const double* wqkv, const double* bqkv, const double* wo,
                     const double* bo) {
  const int rows = batch * seq, hd = width / heads;
  Vec qkv = Linear(x, rows, width, 3 * width, wqkv, bqkv, 0);
  Vec merged(static_cast<size_t>(rows) * width, 0.0);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      auto at = [&](int t, int which, int e) {
        return qkv[(b * seq + t) * 3 * width + which * width + h * hd + e];
      };
      for (int i = 0; i < seq; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += at(i, 0, e) * at(j, 1, e);
          s[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        for (int e = 0; e < hd; ++e) {
          double o = 0;
          for (int j = 0; j <= i; ++j) o += s[j] / z * at(j, 2, e);
          merged[(b * seq + i) * width + h * hd + e] = o;
        }
      }
    }
  }
  return Linear(merged, rows, width, width, wo, bo, 0);
}

// Mean cross-entropy over rows (rows with label < 0 add nothing).
inline double CrossEntropy(const Vec& logits, const std::vector<int32_t>& labels,
                           int rows, int classes) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    if (labels[r] < 0) continue;
    double mx = -1e300, z = 0;
    for (int c = 0; c < classes; ++c) mx = std::max(mx, logits[r * classes + c]);
    for (int c = 0; c < classes; ++c) z += std::exp(logits[r * classes + c] - mx);
    total += std::log(z) + mx - logits[r * classes + labels[r]];
  }
  return total / rows;
}

inline Vec Add(const Vec& a, const Vec& b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

}  // namespace ref
}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_REFERENCE_TESTUTIL_H_
