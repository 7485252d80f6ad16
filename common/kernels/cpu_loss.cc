// CpuBackend: fused softmax cross-entropy and row argmax.
#include "common/kernels/cpu_backend.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/kernels/cpu_vector_math.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace {

using cpu_internal::SoftmaxRowInPlace;

// probs = softmax(logits) per row; returns sum over labelled rows of
// -log probs[label] (double). probs may alias logits.
TANDEM_CPU_INLINE void SoftmaxXentRowsBody(int rows, int classes, const float* logits,
                                       const int32_t* labels, float* probs, double* total) {
  double t = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* lr = logits + static_cast<int64_t>(r) * classes;
    float* pr = probs + static_cast<int64_t>(r) * classes;
    const int32_t label = labels[r];
    // Read the label's logit before probs (which may alias logits) is written.
    const float picked = label >= 0 ? lr[label] : 0.f;
    if (pr != lr) std::memcpy(pr, lr, classes * sizeof(float));
    float sum, mx;
    SoftmaxRowInPlace(pr, classes, 1.f, &sum, &mx);
    if (label >= 0) t += static_cast<double>(std::log(sum) - (picked - mx));
  }
  *total = t;
}
TANDEM_CPU_DISPATCHED_COMPUTE(SoftmaxXentRows,
                      (int rows, int classes, const float* logits, const int32_t* labels,
                       float* probs, double* total),
                      (rows, classes, logits, labels, probs, total))

}  // namespace

void CpuBackend::SoftmaxCrossEntropyForward(int rows, int classes,
                                            const float* logits,
                                            const int32_t* labels, float scale,
                                            float* probs, float* loss) {
  double total = 0.0;
  SoftmaxXentRows(rows, classes, logits, labels, probs, &total);
  *loss = static_cast<float>(total * scale);
}

void CpuBackend::SoftmaxCrossEntropyBackward(int rows, int classes,
                                             const float* probs,
                                             const int32_t* labels,
                                             float scale, float* dlogits) {
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * classes;
    const int32_t label = labels[r];
    if (label < 0) {
      std::memset(dlogits + off, 0, classes * sizeof(float));
      continue;
    }
    for (int c = 0; c < classes; ++c) dlogits[off + c] = scale * probs[off + c];
    dlogits[off + label] -= scale;
  }
}

void CpuBackend::ArgmaxRows(int rows, int cols, const float* x, int32_t* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * cols;
    int best = 0;
    for (int c = 1; c < cols; ++c) {
      if (xr[c] > xr[best]) best = c;
    }
    out[r] = best;
  }
}

}  // namespace kernels
}  // namespace tandem
