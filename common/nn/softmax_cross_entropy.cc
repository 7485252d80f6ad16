#include "common/nn/softmax_cross_entropy.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

absl::Status SoftmaxCrossEntropy::Init(kernels::Backend* backend,
                                       int max_rows) {
  backend_ = backend;
  max_rows_ = max_rows;
  const size_t bytes = static_cast<size_t>(max_rows) * classes_ * sizeof(float);
  ASSIGN_OR_RETURN(probs_, backend->Allocate(bytes));
  ASSIGN_OR_RETURN(dlogits_, backend->Allocate(bytes));
  ASSIGN_OR_RETURN(loss_, backend->Allocate(sizeof(float)));
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy::Forward(const float* logits,
                                          const int32_t* labels, int rows) {
  RETURN_IF_ERROR(CheckRows("SoftmaxCrossEntropy", rows, max_rows_));
  labels_ = labels;
  rows_ = rows;
  backend_->SoftmaxCrossEntropyForward(rows, classes_, logits, labels,
                                       1.f / rows, probs_.f32(), loss_.f32());
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy::Backward(float loss_scale) {
  if (labels_ == nullptr) {
    return absl::FailedPreconditionError(
        "SoftmaxCrossEntropy: Backward before Forward");
  }
  backend_->SoftmaxCrossEntropyBackward(rows_, classes_, probs_.f32(), labels_,
                                        loss_scale / rows_, dlogits_.f32());
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
