// Embedding gather / scatter-add and the attention head reshapes of the CUDA
// backend, with the semantics of Backend::EmbeddingForward/Backward and
// SplitHeads/MergeHeads (common/kernels/backend.h).
//
// Ids outside [0, vocab) break the Backend contract; here they produce a zero
// token row in the forward pass and are skipped in the backward pass instead
// of touching memory out of bounds. The backward pass adds with float
// atomics (repeated ids collide), so it is not bit-reproducible.
// Launchers enqueue on `stream`, return the launch error, never block or
// allocate. Thread-compatible.
#ifndef TANDEM_COMMON_KERNELS_CUDA_EMBEDDING_KERNELS_H_
#define TANDEM_COMMON_KERNELS_CUDA_EMBEDDING_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace cuda {

// out[b, t, :] = token_table[ids[b, t], :] + pos_table[t, :] (pos_table may
// be null).
cudaError_t LaunchEmbeddingForward(int64_t batch, int64_t seq, int64_t dim,
                                   int64_t vocab, const int32_t* ids,
                                   const float* token_table,
                                   const float* pos_table, float* out,
                                   cudaStream_t stream);
// dtoken[ids[b, t], :] += dout[b, t, :]; dpos[t, :] += dout[b, t, :] if
// dpos is non-null. Accumulates.
cudaError_t LaunchEmbeddingBackward(int64_t batch, int64_t seq, int64_t dim,
                                    int64_t vocab, const int32_t* ids,
                                    const float* dout, float* dtoken,
                                    float* dpos, cudaStream_t stream);

// x [batch, seq, n, heads, head_dim] -> out [n, batch, heads, seq, head_dim].
cudaError_t LaunchSplitHeads(int64_t batch, int64_t seq, int64_t n,
                             int64_t heads, int64_t head_dim, const float* x,
                             float* out, cudaStream_t stream);
// x [n, batch, heads, seq, head_dim] -> out [batch, seq, n, heads, head_dim].
cudaError_t LaunchMergeHeads(int64_t batch, int64_t seq, int64_t n,
                             int64_t heads, int64_t head_dim, const float* x,
                             float* out, cudaStream_t stream);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_EMBEDDING_KERNELS_H_
