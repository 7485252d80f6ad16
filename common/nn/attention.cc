#include "common/nn/attention.h"

#include <cmath>

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

using kernels::Activation;
using kernels::Transpose;

CausalSelfAttention::CausalSelfAttention(int width, int heads, int context)
    : width_(width),
      heads_(heads),
      head_dim_(width / heads),
      context_(context),
      qkv_(width, 3 * width, Activation::kNone),
      proj_(width, width, Activation::kNone) {}

void CausalSelfAttention::AddParams(const std::string& prefix, int group,
                                    tensor::ParameterLayout* layout) {
  proj_.AddParams(prefix + ".proj", group, layout);
  qkv_.AddParams(prefix + ".qkv", group + 1, layout);
}

absl::Status CausalSelfAttention::Init(kernels::Backend* backend,
                                       const tensor::FlatStorage& storage,
                                       int max_batch) {
  backend_ = backend;
  max_batch_ = max_batch;
  const int max_rows = max_batch * context_;
  RETURN_IF_ERROR(qkv_.Init(backend, storage, max_rows));
  RETURN_IF_ERROR(proj_.Init(backend, storage, max_rows));
  const size_t act = static_cast<size_t>(max_rows) * width_ * sizeof(float);
  const size_t scores = static_cast<size_t>(max_batch) * heads_ * context_ *
                        context_ * sizeof(float);
  ASSIGN_OR_RETURN(heads_qkv_, backend->Allocate(3 * act));
  ASSIGN_OR_RETURN(d_heads_qkv_, backend->Allocate(3 * act));
  ASSIGN_OR_RETURN(d_qkv_, backend->Allocate(3 * act));
  ASSIGN_OR_RETURN(probs_, backend->Allocate(scores));
  ASSIGN_OR_RETURN(d_scores_, backend->Allocate(scores));
  ASSIGN_OR_RETURN(heads_out_, backend->Allocate(act));
  ASSIGN_OR_RETURN(merged_, backend->Allocate(act));
  return absl::OkStatus();
}

absl::Status CausalSelfAttention::Forward(const float* x, int batch, int seq) {
  RETURN_IF_ERROR(CheckRows("CausalSelfAttention (batch)", batch, max_batch_));
  RETURN_IF_ERROR(CheckRows("CausalSelfAttention (sequence)", seq, context_));
  batch_ = batch;
  seq_ = seq;
  const int rows = batch * seq;
  const int bh = batch * heads_;
  const int64_t head_stride = static_cast<int64_t>(seq) * head_dim_;
  const int64_t plane = static_cast<int64_t>(rows) * width_;  // Q, K or V
  RETURN_IF_ERROR(qkv_.Forward(x, rows));
  backend_->SplitHeads(batch, seq, 3, heads_, head_dim_, qkv_.output(),
                       heads_qkv_.f32());
  const float* q = heads_qkv_.f32();
  const float* k = q + plane;
  const float* v = k + plane;
  // scores = Q K^T per (batch, head), then the masked, scaled softmax in place.
  backend_->GemmStridedBatched(Transpose::kNo, Transpose::kYes, seq, seq,
                               head_dim_, 1.f, q, head_dim_, head_stride, k,
                               head_dim_, head_stride, 0.f, probs_.f32(), seq,
                               static_cast<int64_t>(seq) * seq, bh);
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim_));
  backend_->CausalSoftmaxForward(bh, seq, scale, probs_.f32(), probs_.f32());
  backend_->GemmStridedBatched(Transpose::kNo, Transpose::kNo, seq, head_dim_,
                               seq, 1.f, probs_.f32(), seq,
                               static_cast<int64_t>(seq) * seq, v, head_dim_,
                               head_stride, 0.f, heads_out_.f32(), head_dim_,
                               head_stride, bh);
  backend_->MergeHeads(batch, seq, 1, heads_, head_dim_, heads_out_.f32(),
                       merged_.f32());
  return proj_.Forward(merged_.f32(), rows);
}

absl::Status CausalSelfAttention::Backward(
    float* dy, float* dx, float grad_beta,
    const std::function<void()>& after_proj) {
  if (batch_ == 0) {
    return absl::FailedPreconditionError(
        "CausalSelfAttention: Backward before Forward");
  }
  const int batch = batch_, seq = seq_, rows = batch * seq, bh = batch * heads_;
  const int64_t head_stride = static_cast<int64_t>(seq) * head_dim_;
  const int64_t score_stride = static_cast<int64_t>(seq) * seq;
  const int64_t plane = static_cast<int64_t>(rows) * width_;
  // d_qkv_ is free until the end, so it holds d merged [rows, width] first.
  float* d_merged = d_qkv_.f32();
  RETURN_IF_ERROR(proj_.Backward(dy, d_merged, grad_beta));
  if (after_proj) after_proj();
  float* d_out = heads_out_.f32();  // forward value not needed any more
  backend_->SplitHeads(batch, seq, 1, heads_, head_dim_, d_merged, d_out);
  const float* q = heads_qkv_.f32();
  const float* k = q + plane;
  const float* v = k + plane;
  float* dq = d_heads_qkv_.f32();
  float* dk = dq + plane;
  float* dv = dk + plane;
  // dP = dO V^T ; dV = P^T dO.
  backend_->GemmStridedBatched(Transpose::kNo, Transpose::kYes, seq, seq,
                               head_dim_, 1.f, d_out, head_dim_, head_stride, v,
                               head_dim_, head_stride, 0.f, d_scores_.f32(),
                               seq, score_stride, bh);
  backend_->GemmStridedBatched(Transpose::kYes, Transpose::kNo, seq, head_dim_,
                               seq, 1.f, probs_.f32(), seq, score_stride, d_out,
                               head_dim_, head_stride, 0.f, dv, head_dim_,
                               head_stride, bh);
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim_));
  backend_->CausalSoftmaxBackward(bh, seq, scale, probs_.f32(),
                                  d_scores_.f32(), d_scores_.f32());
  // dQ = dS K ; dK = dS^T Q.
  backend_->GemmStridedBatched(Transpose::kNo, Transpose::kNo, seq, head_dim_,
                               seq, 1.f, d_scores_.f32(), seq, score_stride, k,
                               head_dim_, head_stride, 0.f, dq, head_dim_,
                               head_stride, bh);
  backend_->GemmStridedBatched(Transpose::kYes, Transpose::kNo, seq, head_dim_,
                               seq, 1.f, d_scores_.f32(), seq, score_stride, q,
                               head_dim_, head_stride, 0.f, dk, head_dim_,
                               head_stride, bh);
  backend_->MergeHeads(batch, seq, 3, heads_, head_dim_, dq, d_qkv_.f32());
  return qkv_.Backward(d_qkv_.f32(), dx, grad_beta);
}

}  // namespace nn
}  // namespace tandem
