// CausalSelfAttention: multi-head self-attention with a causal mask,
//   qkv = x Wqkv^T + bqkv            (one fused projection, [rows, 3 * width])
//   per head: P = softmax(Q K^T / sqrt(head_dim), masked j > i); O = P V
//   y = O Wo^T + bo                  (O [rows, width], heads side by side)
// on x [batch, seq, width]. The per-head GEMMs read Q, K, V straight out of
// the fused projection's output (leading dimension 3 * width) and write O
// straight into the projection's input, so no head split / merge copies
// run. The causal mask is applied by blocks: with row blocks of
// kCausalBlock, the GEMMs cover only the block lower triangle of every
// [seq, seq] score matrix (3/4 of it at seq = 2 blocks, 5/8 at 4), and the softmax
// zeroes what lies above the diagonal inside it. Probabilities are
// materialised ([batch * heads, seq, seq]); fine for the short contexts
// tandem trains on CPU, and the CUDA backend runs the same strided-batched
// GEMMs on tensor cores. Where the backend has a causal kernel of its own
// (Backend::CausalGemmStridedBatched: the CPU backend's AVX-512 one, head
// sizes a multiple of 16) each GEMM below runs on it instead, masking at
// row granularity; the blocks then only describe the OpenBLAS path.
// See layer.h for the life cycle, ownership and errors.
#ifndef TANDEM_COMMON_NN_ATTENTION_H_
#define TANDEM_COMMON_NN_ATTENTION_H_

#include <string>

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"
#include "common/nn/linear.h"
#include "common/tensor/flat_storage.h"
#include "common/tensor/parameter_layout.h"

namespace tandem {
namespace nn {

// The causal attention GEMMs, as free functions so benchmarks can time
// them one by one (tools/bench/gpt_step_kernels). `qkv` is the fused
// projection's output [batch, seq, 3, heads, head_dim]; `scores` / `probs`
// hold batch * heads [seq, seq] matrices of which the lower triangle is
// written, and at most the block lower triangle (the softmax kernels write
// every entry of a row, zero above the diagonal);
// `out` / `d_out` are [batch, seq, heads, head_dim]; `d_qkv` has qkv's
// layout. Every call overwrites its output block (beta = 0).
struct CausalAttentionShape {
  int batch = 0, seq = 0, heads = 0, head_dim = 0;
};
// Rows per causal block. gpt_breakdown_bench at context 128 (2026-12-05):
// 32 and 64 both cut the attention kernels from 17.6 to 11.2 ms per step
// (the split / merge copies gone, a quarter of the GEMM work skipped); 64
// keeps the GEMMs larger at longer contexts.
inline constexpr int kCausalBlock = 64;
// GEMM FLOP of any one of the six calls below on the OpenBLAS path (they
// cover the same blocks; the causal kernel does a little less).
double CausalAttentionGemmFlops(const CausalAttentionShape& s);
// scores = alpha Q K^T (alpha = 1/sqrt(head_dim) folds the softmax's scale
// into the GEMM).
void CausalScores(kernels::Backend* be, const CausalAttentionShape& s, float alpha,
                  const float* qkv, float* scores);
// out = P V.
void CausalProbsTimesV(kernels::Backend* be, const CausalAttentionShape& s, const float* probs,
                       const float* qkv, float* out);
// d_probs = dO V^T.
void CausalProbsGrad(kernels::Backend* be, const CausalAttentionShape& s, const float* d_out,
                     const float* qkv, float* d_probs);
// dV = P^T dO (into d_qkv's V part).
void CausalValueGrad(kernels::Backend* be, const CausalAttentionShape& s, const float* probs,
                     const float* d_out, float* d_qkv);
// dQ = dS K and dK = dS^T Q (into d_qkv's Q and K parts), dS the gradient
// with respect to the unscaled scores (CausalSoftmaxBackward's output).
void CausalQueryKeyGrad(kernels::Backend* be, const CausalAttentionShape& s, const float* d_scores,
                        const float* qkv, float* d_qkv);

class CausalSelfAttention {
 public:
  // width must be a multiple of heads (the model checks the spec).
  CausalSelfAttention(int width, int heads, int context);
  CausalSelfAttention(const CausalSelfAttention&) = delete;
  CausalSelfAttention& operator=(const CausalSelfAttention&) = delete;

  // Two groups in backward order: the output projection ("<prefix>.proj")
  // as `group`, the QKV projection ("<prefix>.qkv") as `group + 1`.
  void AddParams(const std::string& prefix, int group,
                 tensor::ParameterLayout* layout);
  absl::Status Init(kernels::Backend* backend,
                    const tensor::FlatStorage& storage, int max_batch);
  // x [batch, seq, width] -> output() [batch, seq, width]; seq <= context.
  absl::Status Forward(const float* x, int batch, int seq);
  // dy (left as is: the output projection has no activation) -> dx (must
  // not alias dy). `after_proj` runs once the
  // output projection's gradients are final (the QKV ones are final when
  // Backward returns), so callers can report both groups as they finish.
  absl::Status Backward(float* dy, float* dx, float grad_beta,
                        const std::function<void()>& after_proj = nullptr);
  float* output() const { return proj_.output(); }
  Linear& qkv() { return qkv_; }
  Linear& proj() { return proj_; }

 private:
  int width_, heads_, head_dim_, context_;
  Linear qkv_, proj_;
  kernels::Backend* backend_ = nullptr;
  int max_batch_ = 0, batch_ = 0, seq_ = 0;
  // [batch * heads, seq, seq] attention probabilities.
  kernels::DeviceBuffer probs_;
  // The heads' outputs side by side [batch, seq, width] (proj's input).
  kernels::DeviceBuffer merged_;
  // Backward scratch: gradient wrt merged_, wrt scores, wrt the fused qkv.
  kernels::DeviceBuffer d_merged_, d_scores_, d_qkv_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_ATTENTION_H_
