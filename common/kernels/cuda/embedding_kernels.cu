#include "common/kernels/cuda/embedding_kernels.h"

#include "common/kernels/cuda/launch.cuh"

namespace tandem {
namespace cuda {
namespace {

using internal::GlobalIndex;
using internal::GridFor;
using internal::GridStride;
using internal::kThreads;

// One thread per output element; consecutive threads read consecutive
// elements of one table row.
__global__ void EmbeddingForwardKernel(int64_t tokens, int64_t seq,
                                       int64_t dim, int64_t vocab,
                                       const int32_t* ids,
                                       const float* token_table,
                                       const float* pos_table, float* out) {
  const int64_t n = tokens * dim;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const int64_t token = i / dim;
    const int64_t d = i - token * dim;
    const int64_t id = ids[token];
    float v = (id >= 0 && id < vocab) ? token_table[id * dim + d] : 0.0f;
    if (pos_table != nullptr) v += pos_table[(token % seq) * dim + d];
    out[i] = v;
  }
}

__global__ void EmbeddingBackwardKernel(int64_t tokens, int64_t seq,
                                        int64_t dim, int64_t vocab,
                                        const int32_t* ids, const float* dout,
                                        float* dtoken, float* dpos) {
  const int64_t n = tokens * dim;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const int64_t token = i / dim;
    const int64_t d = i - token * dim;
    const int64_t id = ids[token];
    const float g = dout[i];
    if (id >= 0 && id < vocab) atomicAdd(&dtoken[id * dim + d], g);
    if (dpos != nullptr) atomicAdd(&dpos[(token % seq) * dim + d], g);
  }
}

// Index arithmetic shared by split and merge: element (k, b, h, s, d) lives
// at ((((b * seq + s) * n + k) * heads + h) * head_dim + d) in the merged
// layout and at ((((k * batch + b) * heads + h) * seq + s) * head_dim + d) in
// the split layout. Both kernels walk the *output* linearly (coalesced
// writes) and gather from the input.
__global__ void SplitHeadsKernel(int64_t batch, int64_t seq, int64_t n,
                                 int64_t heads, int64_t head_dim,
                                 const float* x, float* out) {
  const int64_t total = batch * seq * n * heads * head_dim;
  for (int64_t o = GlobalIndex(); o < total; o += GridStride()) {
    int64_t rest = o;
    const int64_t d = rest % head_dim;
    rest /= head_dim;
    const int64_t s = rest % seq;
    rest /= seq;
    const int64_t h = rest % heads;
    rest /= heads;
    const int64_t b = rest % batch;
    const int64_t k = rest / batch;
    out[o] = x[(((b * seq + s) * n + k) * heads + h) * head_dim + d];
  }
}

__global__ void MergeHeadsKernel(int64_t batch, int64_t seq, int64_t n,
                                 int64_t heads, int64_t head_dim,
                                 const float* x, float* out) {
  const int64_t total = batch * seq * n * heads * head_dim;
  for (int64_t o = GlobalIndex(); o < total; o += GridStride()) {
    int64_t rest = o;
    const int64_t d = rest % head_dim;
    rest /= head_dim;
    const int64_t h = rest % heads;
    rest /= heads;
    const int64_t k = rest % n;
    rest /= n;
    const int64_t s = rest % seq;
    const int64_t b = rest / seq;
    out[o] = x[(((k * batch + b) * heads + h) * seq + s) * head_dim + d];
  }
}

}  // namespace

cudaError_t LaunchEmbeddingForward(int64_t batch, int64_t seq, int64_t dim,
                                   int64_t vocab, const int32_t* ids,
                                   const float* token_table,
                                   const float* pos_table, float* out,
                                   cudaStream_t stream) {
  const int64_t tokens = batch * seq;
  if (tokens <= 0 || dim <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<GridFor(tokens * dim), kThreads, 0, stream>>>(
      tokens, seq, dim, vocab, ids, token_table, pos_table, out);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackward(int64_t batch, int64_t seq, int64_t dim,
                                    int64_t vocab, const int32_t* ids,
                                    const float* dout, float* dtoken,
                                    float* dpos, cudaStream_t stream) {
  const int64_t tokens = batch * seq;
  if (tokens <= 0 || dim <= 0) return cudaSuccess;
  EmbeddingBackwardKernel<<<GridFor(tokens * dim), kThreads, 0, stream>>>(
      tokens, seq, dim, vocab, ids, dout, dtoken, dpos);
  return cudaGetLastError();
}

cudaError_t LaunchSplitHeads(int64_t batch, int64_t seq, int64_t n,
                             int64_t heads, int64_t head_dim, const float* x,
                             float* out, cudaStream_t stream) {
  const int64_t total = batch * seq * n * heads * head_dim;
  if (total <= 0) return cudaSuccess;
  SplitHeadsKernel<<<GridFor(total), kThreads, 0, stream>>>(
      batch, seq, n, heads, head_dim, x, out);
  return cudaGetLastError();
}

cudaError_t LaunchMergeHeads(int64_t batch, int64_t seq, int64_t n,
                             int64_t heads, int64_t head_dim, const float* x,
                             float* out, cudaStream_t stream) {
  const int64_t total = batch * seq * n * heads * head_dim;
  if (total <= 0) return cudaSuccess;
  MergeHeadsKernel<<<GridFor(total), kThreads, 0, stream>>>(
      batch, seq, n, heads, head_dim, x, out);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace tandem
