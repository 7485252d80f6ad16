// CpuBackend: the attention pieces (head split / merge, causal softmax).
#include "common/kernels/cpu_backend.h"

#include <cstdint>
#include <cstring>

#include "common/kernels/cpu_vector_math.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace {

using cpu_internal::DotOf;
using cpu_internal::SoftmaxRowInPlace;

// Causal softmax in place over `batch` [seq, seq] matrices.
TANDEM_CPU_INLINE void CausalSoftmaxInPlaceBody(int batch, int seq, float scale, float* p) {
  for (int64_t row = 0; row < static_cast<int64_t>(batch) * seq; ++row) {
    const int i = static_cast<int>(row % seq);
    float* __restrict pr = p + row * seq;
    float sum, mx;
    SoftmaxRowInPlace(pr, i + 1, scale, &sum, &mx);
    for (int j = i + 1; j < seq; ++j) pr[j] = 0.f;
  }
}
TANDEM_CPU_DISPATCHED_COMPUTE(CausalSoftmaxInPlace, (int batch, int seq, float scale, float* p),
                      (batch, seq, scale, p))

// d = scale * p * (d - sum_j d * p) in place, 0 above the diagonal.
TANDEM_CPU_INLINE void CausalSoftmaxGradInPlaceBody(int batch, int seq, float scale, const float* p,
                                             float* d) {
  for (int64_t row = 0; row < static_cast<int64_t>(batch) * seq; ++row) {
    const int n = static_cast<int>(row % seq) + 1;
    const float* __restrict pr = p + row * seq;
    float* __restrict dr = d + row * seq;
    const float dot = DotOf(dr, pr, n);
    for (int j = 0; j < n; ++j) dr[j] = scale * pr[j] * (dr[j] - dot);
    for (int j = n; j < seq; ++j) dr[j] = 0.f;
  }
}
TANDEM_CPU_DISPATCHED_COMPUTE(CausalSoftmaxGradInPlace,
                      (int batch, int seq, float scale, const float* p, float* d),
                      (batch, seq, scale, p, d))


// Row `src` of [batch, seq, n, heads, head_dim] <-> row `dst` of
// [n, batch, heads, seq, head_dim]; `split` picks the direction.
void PermuteHeads(int batch, int seq, int n, int heads, int head_dim, const float* x,
                         float* out, bool split) {
  const size_t row_bytes = static_cast<size_t>(head_dim) * sizeof(float);
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      for (int i = 0; i < n; ++i) {
        for (int h = 0; h < heads; ++h) {
          const int64_t merged = ((static_cast<int64_t>(b) * seq + t) * n + i) * heads + h;
          const int64_t split_row = ((static_cast<int64_t>(i) * batch + b) * heads + h) * seq + t;
          const int64_t src = split ? merged : split_row;
          const int64_t dst = split ? split_row : merged;
          std::memcpy(out + dst * head_dim, x + src * head_dim, row_bytes);
        }
      }
    }
  }
}

}  // namespace

void CpuBackend::SplitHeads(int batch, int seq, int n, int heads, int head_dim,
                            const float* x, float* out) {
  PermuteHeads(batch, seq, n, heads, head_dim, x, out, /*split=*/true);
}

void CpuBackend::MergeHeads(int batch, int seq, int n, int heads, int head_dim,
                            const float* x, float* out) {
  PermuteHeads(batch, seq, n, heads, head_dim, x, out, /*split=*/false);
}

void CpuBackend::CausalSoftmaxForward(int batch, int seq, float scale,
                                      const float* scores, float* probs) {
  if (probs != scores) {
    std::memcpy(probs, scores, static_cast<size_t>(batch) * seq * seq * sizeof(float));
  }
  CausalSoftmaxInPlace(batch, seq, scale, probs);
}

void CpuBackend::CausalSoftmaxBackward(int batch, int seq, float scale,
                                       const float* probs, const float* dprobs,
                                       float* dscores) {
  if (dscores != dprobs) {
    std::memcpy(dscores, dprobs, static_cast<size_t>(batch) * seq * seq * sizeof(float));
  }
  CausalSoftmaxGradInPlace(batch, seq, scale, probs, dscores);
}

}  // namespace kernels
}  // namespace tandem
