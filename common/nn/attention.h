// CausalSelfAttention: multi-head self-attention with a causal mask,
//   qkv = x Wqkv^T + bqkv            (one fused projection, [rows, 3 * width])
//   per head: P = softmax(Q K^T / sqrt(head_dim), masked j > i); O = P V
//   y = merge_heads(O) Wo^T + bo
// on x [batch, seq, width]. Scores are materialised ([batch * heads, seq,
// seq]); fine for the short contexts tandem trains on CPU, and the CUDA
// backend runs the same batched GEMMs on tensor cores.
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
  // dy (overwritten) -> dx (must not alias dy). `after_proj` runs once the
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
  // [3, batch, heads, seq, head_dim]: Q, K, V per head.
  kernels::DeviceBuffer heads_qkv_;
  // [batch * heads, seq, seq] attention probabilities.
  kernels::DeviceBuffer probs_;
  // [batch, heads, seq, head_dim] per-head outputs, and merged [batch, seq, width].
  kernels::DeviceBuffer heads_out_, merged_;
  // Backward scratch: gradient wrt heads_qkv_, wrt scores, wrt merged qkv.
  kernels::DeviceBuffer d_heads_qkv_, d_scores_, d_qkv_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_ATTENTION_H_
