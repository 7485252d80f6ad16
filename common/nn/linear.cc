#include "common/nn/linear.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

using kernels::Activation;
using kernels::Transpose;

void Linear::AddParams(const std::string& prefix, int group,
                       tensor::ParameterLayout* layout) {
  weight_ = layout->Add(prefix + ".weight", {out_, in_}, group);
  if (has_bias_) bias_ = layout->Add(prefix + ".bias", {out_}, group);
}

absl::Status Linear::Init(kernels::Backend* backend,
                          const tensor::FlatStorage& storage, int max_rows) {
  backend_ = backend;
  max_rows_ = max_rows;
  w_ = storage.param(weight_);
  dw_ = storage.grad(weight_);
  if (has_bias_) {
    b_ = storage.param(bias_);
    db_ = storage.grad(bias_);
  }
  const size_t bytes = static_cast<size_t>(max_rows) * out_ * sizeof(float);
  ASSIGN_OR_RETURN(z_, backend->Allocate(bytes));
  if (act_ != Activation::kNone) {
    ASSIGN_OR_RETURN(y_, backend->Allocate(bytes));
  }
  return absl::OkStatus();
}

absl::Status Linear::Forward(const float* x, int rows) {
  RETURN_IF_ERROR(CheckRows("Linear", rows, max_rows_));
  x_ = x;
  rows_ = rows;
  backend_->Gemm(Transpose::kNo, Transpose::kYes, rows, out_, in_, 1.f, x, in_,
                 w_, in_, 0.f, z_.f32(), out_);
  if (act_ == Activation::kGelu) {
    // z_ keeps gelu'(z), so Backward multiplies instead of re-evaluating it.
    backend_->BiasActivationForwardKeepGrad(act_, rows, out_, b_, z_.f32(), y_.f32());
  } else if (b_ != nullptr || act_ != Activation::kNone) {
    backend_->BiasActivationForward(act_, rows, out_, b_, z_.f32(),
                                    act_ == Activation::kNone ? z_.f32() : y_.f32());
  }
  return absl::OkStatus();
}

absl::Status Linear::Backward(float* dy, float* dx, float grad_beta) {
  if (x_ == nullptr) {
    return absl::FailedPreconditionError("Linear: Backward before Forward");
  }
  const int rows = rows_;
  // dz = dy * act'(z), in place; db = column sums of dz.
  if (act_ == Activation::kGelu) {
    backend_->BiasActivationBackwardFromGrad(rows, out_, z_.f32(), dy, dy, db_, grad_beta);
  } else if (act_ != Activation::kNone || db_ != nullptr) {
    backend_->BiasActivationBackward(act_, rows, out_, z_.f32(), dy, dy, db_,
                                     grad_beta);
  }
  // dW = dz^T x ; dx = dz W.
  backend_->Gemm(Transpose::kYes, Transpose::kNo, out_, in_, rows, 1.f, dy,
                 out_, x_, in_, grad_beta, dw_, in_);
  if (dx != nullptr) {
    backend_->Gemm(Transpose::kNo, Transpose::kNo, rows, in_, out_, 1.f, dy,
                   out_, w_, in_, 0.f, dx, in_);
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
