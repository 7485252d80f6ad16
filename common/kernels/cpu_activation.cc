// CpuBackend: bias + activation (ReLU, GELU) forward and backward, the
// stand-alone activations and bias gradients.
#include "common/kernels/cpu_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/kernels/cpu_vector_math.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace {

using cpu_internal::GeluAndGradFast;
using cpu_internal::GeluFast;
using cpu_internal::GeluGradFast;
using cpu_internal::ScaleOrZero;

// ---- Element-wise hot loops, compiled twice ----------------------------------
// The build targets x86-64-v2 (SSE4.2), so plain loops get 128-bit vectors.
// Each body below is an always-inline template instantiated twice: into a
// function with target("avx2,fma") (256-bit vectors) and into one for the
// baseline; the first call picks one from the CPU's features. Bodies are
// branch-free (a ReLU as a select, not an if: a data-dependent branch on
// the sign mispredicts about half the time) and mark their pointers
// __restrict; in-place calls (dz == dy) have their own loop, because the
// vectoriser's run-time overlap check would send an exact alias to the
// scalar fallback.
TANDEM_CPU_INLINE float Relu(float v) { return v > 0.f ? v : 0.f; }

// z = z + bias (bias may be null); y = relu(z) (y != z) or y = z.
TANDEM_CPU_INLINE void BiasReluForwardBody(int rows, int cols, const float* __restrict bias,
                                       float* z, float* y, bool relu) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict zr = z + static_cast<int64_t>(r) * cols;
    if (!relu) {
      if (bias != nullptr) {
        for (int c = 0; c < cols; ++c) zr[c] += bias[c];
      }
      if (y != z) std::memcpy(y + static_cast<int64_t>(r) * cols, zr, cols * sizeof(float));
      continue;
    }
    float* __restrict yr = y + static_cast<int64_t>(r) * cols;
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) {
        const float v = zr[c] + bias[c];
        zr[c] = v;
        yr[c] = Relu(v);
      }
    } else {
      for (int c = 0; c < cols; ++c) yr[c] = Relu(zr[c]);
    }
  }
}
TANDEM_CPU_DISPATCHED(BiasReluForward,
                  (int rows, int cols, const float* bias, float* z, float* y, bool relu),
                  (rows, cols, bias, z, y, relu))

// dz = dy * relu'(z) (relu) or dz = dy; dbias (may be null) += column sums
// of dz. dz either equals dy or does not overlap it.
TANDEM_CPU_INLINE void ReluBackwardBody(int rows, int cols, const float* z, const float* dy,
                                    float* dz, float* dbias, bool relu) {
  float* __restrict db = dbias;
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    const float* __restrict zr = z + off;
    if (dz == dy) {
      float* __restrict d = dz + off;
      if (relu && db != nullptr) {
        for (int c = 0; c < cols; ++c) {
          const float g = d[c];
          const float v = zr[c] > 0.f ? g : 0.f;
          d[c] = v;
          db[c] += v;
        }
      } else if (relu) {
        for (int c = 0; c < cols; ++c) {
          const float g = d[c];
          d[c] = zr[c] > 0.f ? g : 0.f;
        }
      } else if (db != nullptr) {
        for (int c = 0; c < cols; ++c) db[c] += d[c];
      }
    } else {
      const float* __restrict g = dy + off;
      float* __restrict d = dz + off;
      if (relu && db != nullptr) {
        for (int c = 0; c < cols; ++c) {
          const float v = zr[c] > 0.f ? g[c] : 0.f;
          d[c] = v;
          db[c] += v;
        }
      } else if (relu) {
        for (int c = 0; c < cols; ++c) d[c] = zr[c] > 0.f ? g[c] : 0.f;
      } else {
        std::memcpy(d, g, cols * sizeof(float));
        if (db != nullptr) {
          for (int c = 0; c < cols; ++c) db[c] += g[c];
        }
      }
    }
  }
}
TANDEM_CPU_DISPATCHED(ReluBackward,
                  (int rows, int cols, const float* z, const float* dy, float* dz, float* dbias,
                   bool relu),
                  (rows, cols, z, dy, dz, dbias, relu))

// out += column sums of m [rows, cols].
TANDEM_CPU_INLINE void AddColumnSumsBody(int rows, int cols, const float* m, float* out) {
  float* __restrict o = out;
  for (int r = 0; r < rows; ++r) {
    const float* __restrict row = m + static_cast<int64_t>(r) * cols;
    for (int c = 0; c < cols; ++c) o[c] += row[c];
  }
}
TANDEM_CPU_DISPATCHED(AddColumnSums, (int rows, int cols, const float* m, float* out),
                  (rows, cols, m, out))

// z += bias (may be null) over rows; y = gelu(z). y and z do not overlap.
TANDEM_CPU_INLINE void BiasGeluForwardBody(int rows, int cols, const float* __restrict bias,
                                           float* __restrict z, float* __restrict y) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict zr = z + static_cast<int64_t>(r) * cols;
    float* __restrict yr = y + static_cast<int64_t>(r) * cols;
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) zr[c] += bias[c];
    }
    for (int c = 0; c < cols; ++c) yr[c] = GeluFast(zr[c]);
  }
}
TANDEM_CPU_DISPATCHED_COMPUTE(BiasGeluForward,
                      (int rows, int cols, const float* bias, float* z, float* y),
                      (rows, cols, bias, z, y))

// out = dy * gelu'(x) over n; dbias (may be null) += out. out may not
// overlap x or dy (callers stage through a block buffer).
TANDEM_CPU_INLINE void GeluGradBody(int n, const float* __restrict x, const float* __restrict dy,
                                    float* __restrict out, float* __restrict dbias) {
  for (int i = 0; i < n; ++i) out[i] = dy[i] * GeluGradFast(x[i]);
  if (dbias != nullptr) {
    for (int i = 0; i < n; ++i) dbias[i] += out[i];
  }
}
TANDEM_CPU_DISPATCHED_COMPUTE(GeluGrad,
                      (int n, const float* x, const float* dy, float* out, float* dbias),
                      (n, x, dy, out, dbias))

// y = gelu(x) over n, x and y not overlapping.
TANDEM_CPU_INLINE void GeluRangeBody(int n, const float* __restrict x, float* __restrict y) {
  for (int i = 0; i < n; ++i) y[i] = GeluFast(x[i]);
}
TANDEM_CPU_DISPATCHED_COMPUTE(GeluRange, (int n, const float* x, float* y), (n, x, y))

// v = z + bias (bias may be null) over rows; y = act(v), z = act'(v).
// y and z do not overlap.
TANDEM_CPU_INLINE void BiasActKeepGradBody(Activation act, int rows, int cols,
                                           const float* __restrict bias, float* __restrict z,
                                           float* __restrict y) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict zr = z + static_cast<int64_t>(r) * cols;
    float* __restrict yr = y + static_cast<int64_t>(r) * cols;
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) zr[c] += bias[c];
    }
    switch (act) {
      case Activation::kGelu:
        for (int c = 0; c < cols; ++c) yr[c] = GeluAndGradFast(zr[c], &zr[c]);
        break;
      case Activation::kRelu:
        for (int c = 0; c < cols; ++c) {
          const float v = zr[c];
          yr[c] = v > 0.f ? v : 0.f;
          zr[c] = v > 0.f ? 1.f : 0.f;
        }
        break;
      case Activation::kNone:
        for (int c = 0; c < cols; ++c) {
          yr[c] = zr[c];
          zr[c] = 1.f;
        }
        break;
    }
  }
}
TANDEM_CPU_DISPATCHED_COMPUTE(BiasActKeepGrad,
                      (Activation act, int rows, int cols, const float* bias, float* z, float* y),
                      (act, rows, cols, bias, z, y))

// dz = dy * g over [rows, cols]; dbias (may be null) += column sums of dz.
// dz either equals dy or does not overlap it.
TANDEM_CPU_INLINE void MulGradBody(int rows, int cols, const float* __restrict g, const float* dy,
                                   float* dz, float* __restrict dbias) {
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    const float* __restrict gr = g + off;
    if (dz == dy) {
      float* __restrict d = dz + off;
      for (int c = 0; c < cols; ++c) d[c] *= gr[c];
    } else {
      const float* __restrict in = dy + off;
      float* __restrict d = dz + off;
      for (int c = 0; c < cols; ++c) d[c] = in[c] * gr[c];
    }
    if (dbias != nullptr) {
      const float* __restrict d = dz + off;
      for (int c = 0; c < cols; ++c) dbias[c] += d[c];
    }
  }
}
TANDEM_CPU_DISPATCHED(MulGrad,
                      (int rows, int cols, const float* g, const float* dy, float* dz,
                       float* dbias),
                      (rows, cols, g, dy, dz, dbias))

// Rows of at most kGeluBlock: dy and dz may alias, so each block is
// computed into a stack buffer, then copied.
constexpr int kGeluBlock = 1024;

// dz = dy * gelu'(z) over [rows, cols]; dbias (may be null) += column sums.
void GeluBackwardRows(int rows, int cols, const float* z, const float* dy, float* dz,
                      float* dbias) {
  alignas(64) float tmp[kGeluBlock];
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    for (int lo = 0; lo < cols; lo += kGeluBlock) {
      const int len = std::min(kGeluBlock, cols - lo);
      GeluGrad(len, z + off + lo, dy + off + lo, tmp, dbias == nullptr ? nullptr : dbias + lo);
      std::memcpy(dz + off + lo, tmp, len * sizeof(float));
    }
  }
}
// y = act(x) over n elements; separate loops per activation so each one is a
// simple vectorisable loop.
void ApplyActivation(Activation act, int64_t n, const float* x, float* y) {
  switch (act) {
    case Activation::kNone:
      if (x != y) std::memmove(y, x, n * sizeof(float));
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
      break;
    case Activation::kGelu: {
      alignas(64) float tmp[kGeluBlock];
      for (int64_t lo = 0; lo < n; lo += kGeluBlock) {
        const int len = static_cast<int>(std::min<int64_t>(kGeluBlock, n - lo));
        GeluRange(len, x + lo, tmp);
        std::memcpy(y + lo, tmp, len * sizeof(float));
      }
      break;
    }
  }
}

// dx = dy * act'(x).
void ApplyActivationGrad(Activation act, int64_t n, const float* x,
                         const float* dy, float* dx) {
  switch (act) {
    case Activation::kNone:
      if (dx != dy) std::memmove(dx, dy, n * sizeof(float));
      break;
    case Activation::kRelu:
      // One row of n: the branch-free, alias-aware loop above.
      for (int64_t lo = 0; lo < n; lo += INT32_MAX / 2) {
        const int len = static_cast<int>(std::min<int64_t>(n - lo, INT32_MAX / 2));
        ReluBackward(1, len, x + lo, dy + lo, dx + lo, nullptr, /*relu=*/true);
      }
      break;
    case Activation::kGelu:
      for (int64_t lo = 0; lo < n; lo += kGeluBlock) {
        const int len = static_cast<int>(std::min<int64_t>(kGeluBlock, n - lo));
        GeluBackwardRows(1, len, x + lo, dy + lo, dx + lo, nullptr);
      }
      break;
  }
}
}  // namespace

void CpuBackend::BiasActivationForward(Activation act, int rows, int cols,
                                       const float* bias, float* z,
                                       float* y) {
  if (act != Activation::kGelu) {
    BiasReluForward(rows, cols, bias, z, y, act == Activation::kRelu);
    return;
  }
  BiasGeluForward(rows, cols, bias, z, y);
}

void CpuBackend::BiasActivationBackward(Activation act, int rows, int cols,
                                        const float* z, const float* dy,
                                        float* dz, float* dbias,
                                        float dbias_beta) {
  if (dbias != nullptr) ScaleOrZero(cols, dbias_beta, dbias);
  if (act != Activation::kGelu) {
    // One pass: activation gradient and bias column sums together.
    ReluBackward(rows, cols, z, dy, dz, dbias, act == Activation::kRelu);
    return;
  }
  GeluBackwardRows(rows, cols, z, dy, dz, dbias);
}

void CpuBackend::BiasActivationForwardKeepGrad(Activation act, int rows, int cols,
                                               const float* bias, float* z, float* y) {
  BiasActKeepGrad(act, rows, cols, bias, z, y);
}

void CpuBackend::BiasActivationBackwardFromGrad(int rows, int cols, const float* act_grad,
                                                const float* dy, float* dz, float* dbias,
                                                float dbias_beta) {
  if (dbias != nullptr) ScaleOrZero(cols, dbias_beta, dbias);
  MulGrad(rows, cols, act_grad, dy, dz, dbias);
}

void CpuBackend::ActivationForward(Activation act, int64_t n, const float* x,
                                   float* y) {
  ApplyActivation(act, n, x, y);
}

void CpuBackend::ActivationBackward(Activation act, int64_t n, const float* x,
                                    const float* dy, float* dx) {
  ApplyActivationGrad(act, n, x, dy, dx);
}

void CpuBackend::BiasGrad(int rows, int cols, const float* dy, float beta,
                          float* dbias) {
  ScaleOrZero(cols, beta, dbias);
  AddColumnSums(rows, cols, dy, dbias);
}

}  // namespace kernels
}  // namespace tandem
