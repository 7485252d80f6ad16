#include "common/kernels/cuda/softmax_kernels.h"

#include <climits>

#include "common/kernels/cuda/launch.cuh"

namespace tandem {
namespace cuda {
namespace {

using internal::BlockMax;
using internal::BlockSum;
using internal::GlobalIndex;
using internal::GridFor;
using internal::GridStride;
using internal::kThreads;

int RowGrid(int64_t rows) {
  return static_cast<int>(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535);
}

// One block per row. Each thread only ever reads and writes its own columns
// (c = threadIdx.x + k * blockDim.x), so probs may alias logits; the label's
// logit is read before the barrier that precedes any write.
__global__ void SoftmaxXentForwardKernel(int64_t rows, int64_t classes,
                                         const float* logits,
                                         const int32_t* labels, float scale,
                                         float* probs, float* loss) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = logits + r * classes;
    // Online softmax: one read of the row gives this thread's running max
    // and its sum of exp(x - max), rescaled whenever the max grows; a large
    // vocabulary row is then read twice from memory instead of three times.
    float tm = -INFINITY;
    float ts = 0.0f;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const float v = xr[c];
      if (v > tm) {
        ts = ts * expf(tm - v) + 1.0f;  // expf(-inf) = 0 on the first value
        tm = v;
      } else if (tm != -INFINITY) {
        ts += expf(v - tm);
      }
    }
    const int32_t label = labels[r];
    float label_logit = 0.0f;
    if (threadIdx.x == 0 && label >= 0 && label < classes) {
      label_logit = xr[label];
    }
    const float m = BlockMax(tm);
    const float sum = BlockSum(tm == -INFINITY ? 0.0f : ts * expf(tm - m));
    const float inv = 1.0f / sum;
    float* pr = probs + r * classes;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      pr[c] = expf(xr[c] - m) * inv;
    }
    if (threadIdx.x == 0 && label >= 0) {
      // -log p[label] = log(sum) - (x[label] - max), without forming p.
      const float row_loss =
          label < classes ? logf(sum) - (label_logit - m) : NAN;
      atomicAdd(loss, scale * row_loss);
    }
  }
}

__global__ void SoftmaxXentBackwardKernel(int64_t rows, int64_t classes,
                                          const float* probs,
                                          const int32_t* labels, float scale,
                                          float* dlogits) {
  const int64_t n = rows * classes;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const int64_t r = i / classes;
    const int64_t c = i - r * classes;
    const int32_t label = labels[r];
    if (label < 0) {
      dlogits[i] = 0.0f;
    } else {
      dlogits[i] = scale * (probs[i] - (c == label ? 1.0f : 0.0f));
    }
  }
}

// One block per row; each thread keeps its best (value, index) with a strict
// '>' (so its first occurrence wins), then a shared-memory tree keeps the
// larger value, or the smaller index on ties.
__global__ void ArgmaxRowsKernel(int64_t rows, int64_t cols, const float* x,
                                 int32_t* out) {
  __shared__ float best_v[kThreads];
  __shared__ int64_t best_i[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float v = -INFINITY;
    int64_t idx = LLONG_MAX;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      if (xr[c] > v || (idx == LLONG_MAX && xr[c] == v)) {
        v = xr[c];
        idx = c;
      }
    }
    __syncthreads();  // the previous row's readers are done with the arrays
    best_v[threadIdx.x] = v;
    best_i[threadIdx.x] = idx;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        const float ov = best_v[threadIdx.x + half];
        const int64_t oi = best_i[threadIdx.x + half];
        const float mv = best_v[threadIdx.x];
        const int64_t mi = best_i[threadIdx.x];
        if (ov > mv || (ov == mv && oi < mi)) {
          best_v[threadIdx.x] = ov;
          best_i[threadIdx.x] = oi;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      out[r] = best_i[0] == LLONG_MAX ? 0 : static_cast<int32_t>(best_i[0]);
    }
  }
}

// One block per row of the [batch * seq, seq] score matrix; row i of its
// matrix sees columns j <= i. Threads touch only their own columns, so
// probs may alias scores.
__global__ void CausalSoftmaxForwardKernel(int64_t rows, int64_t seq,
                                           float scale, const float* scores,
                                           float* probs) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t len = r % seq + 1;
    const float* sr = scores + r * seq;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      m = fmaxf(m, scale * sr[j]);
    }
    m = BlockMax(m);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      sum += expf(scale * sr[j] - m);
    }
    sum = BlockSum(sum);
    const float inv = 1.0f / sum;
    float* pr = probs + r * seq;
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      pr[j] = j < len ? expf(scale * sr[j] - m) * inv : 0.0f;
    }
  }
}

__global__ void CausalSoftmaxBackwardKernel(int64_t rows, int64_t seq,
                                            float scale, const float* probs,
                                            const float* dprobs,
                                            float* dscores) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t len = r % seq + 1;
    const float* pr = probs + r * seq;
    const float* dpr = dprobs + r * seq;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
      dot += pr[j] * dpr[j];
    }
    dot = BlockSum(dot);
    float* dsr = dscores + r * seq;
    for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
      dsr[j] = j < len ? scale * pr[j] * (dpr[j] - dot) : 0.0f;
    }
  }
}

}  // namespace

cudaError_t LaunchSoftmaxCrossEntropyForward(int64_t rows, int64_t classes,
                                             const float* logits,
                                             const int32_t* labels,
                                             float scale, float* probs,
                                             float* loss, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(loss, 0, sizeof(float), stream);
  if (e != cudaSuccess) return e;
  if (rows <= 0 || classes <= 0) return cudaSuccess;
  SoftmaxXentForwardKernel<<<RowGrid(rows), kThreads, 0, stream>>>(
      rows, classes, logits, labels, scale, probs, loss);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropyBackward(int64_t rows, int64_t classes,
                                              const float* probs,
                                              const int32_t* labels,
                                              float scale, float* dlogits,
                                              cudaStream_t stream) {
  const int64_t n = rows * classes;
  if (n <= 0) return cudaSuccess;
  SoftmaxXentBackwardKernel<<<GridFor(n), kThreads, 0, stream>>>(
      rows, classes, probs, labels, scale, dlogits);
  return cudaGetLastError();
}

cudaError_t LaunchArgmaxRows(int64_t rows, int64_t cols, const float* x,
                             int32_t* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  ArgmaxRowsKernel<<<RowGrid(rows), kThreads, 0, stream>>>(rows, cols, x, out);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmaxForward(int64_t batch, int64_t seq, float scale,
                                       const float* scores, float* probs,
                                       cudaStream_t stream) {
  const int64_t rows = batch * seq;
  if (rows <= 0) return cudaSuccess;
  CausalSoftmaxForwardKernel<<<RowGrid(rows), kThreads, 0, stream>>>(
      rows, seq, scale, scores, probs);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmaxBackward(int64_t batch, int64_t seq,
                                        float scale, const float* probs,
                                        const float* dprobs, float* dscores,
                                        cudaStream_t stream) {
  const int64_t rows = batch * seq;
  if (rows <= 0) return cudaSuccess;
  CausalSoftmaxBackwardKernel<<<RowGrid(rows), kThreads, 0, stream>>>(
      rows, seq, scale, probs, dprobs, dscores);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace tandem
