#include "common/nn/embedding.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

void Embedding::AddParams(const std::string& prefix, int group,
                          tensor::ParameterLayout* layout) {
  token_ = layout->Add(prefix + ".token", {vocab_, width_}, group);
  position_ = layout->Add(prefix + ".position", {context_, width_}, group);
}

absl::Status Embedding::Init(kernels::Backend* backend,
                             const tensor::FlatStorage& storage,
                             int max_batch) {
  backend_ = backend;
  max_batch_ = max_batch;
  tok_ = storage.param(token_);
  pos_ = storage.param(position_);
  dtok_ = storage.grad(token_);
  dpos_ = storage.grad(position_);
  ASSIGN_OR_RETURN(y_, backend->Allocate(static_cast<size_t>(max_batch) *
                                         context_ * width_ * sizeof(float)));
  return absl::OkStatus();
}

absl::Status Embedding::Forward(const int32_t* ids, int batch, int seq) {
  RETURN_IF_ERROR(CheckRows("Embedding (batch)", batch, max_batch_));
  RETURN_IF_ERROR(CheckRows("Embedding (sequence)", seq, context_));
  ids_ = ids;
  batch_ = batch;
  seq_ = seq;
  backend_->EmbeddingForward(batch, seq, width_, ids, tok_, pos_, y_.f32());
  return absl::OkStatus();
}

absl::Status Embedding::Backward(const float* dy, float grad_beta) {
  if (ids_ == nullptr) {
    return absl::FailedPreconditionError("Embedding: Backward before Forward");
  }
  if (grad_beta == 0.f) {
    backend_->Fill(dtok_, static_cast<int64_t>(vocab_) * width_, 0.f);
    backend_->Fill(dpos_, static_cast<int64_t>(context_) * width_, 0.f);
  } else if (grad_beta != 1.f) {
    backend_->Scale(static_cast<int64_t>(vocab_) * width_, grad_beta, dtok_);
    backend_->Scale(static_cast<int64_t>(context_) * width_, grad_beta, dpos_);
  }
  backend_->EmbeddingBackward(batch_, seq_, width_, ids_, dy, dtok_, dpos_);
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
