#include "common/nn/activation.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

absl::Status ActivationLayer::Init(kernels::Backend* backend, int max_rows) {
  backend_ = backend;
  max_rows_ = max_rows;
  ASSIGN_OR_RETURN(y_, backend->Allocate(static_cast<size_t>(max_rows) *
                                         width_ * sizeof(float)));
  return absl::OkStatus();
}

absl::Status ActivationLayer::Forward(const float* x, int rows) {
  RETURN_IF_ERROR(CheckRows("Activation", rows, max_rows_));
  x_ = x;
  rows_ = rows;
  backend_->ActivationForward(act_, static_cast<int64_t>(rows) * width_, x,
                              y_.f32());
  return absl::OkStatus();
}

absl::Status ActivationLayer::Backward(const float* dy, float* dx) {
  if (x_ == nullptr) {
    return absl::FailedPreconditionError("Activation: Backward before Forward");
  }
  backend_->ActivationBackward(act_, static_cast<int64_t>(rows_) * width_, x_,
                               dy, dx);
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
