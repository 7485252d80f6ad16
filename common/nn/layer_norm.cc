#include "common/nn/layer_norm.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

void LayerNorm::AddParams(const std::string& prefix, int group,
                          tensor::ParameterLayout* layout) {
  gamma_ = layout->Add(prefix + ".weight", {width_}, group);
  beta_ = layout->Add(prefix + ".bias", {width_}, group);
}

absl::Status LayerNorm::Init(kernels::Backend* backend,
                             const tensor::FlatStorage& storage, int max_rows) {
  backend_ = backend;
  max_rows_ = max_rows;
  g_ = storage.param(gamma_);
  b_ = storage.param(beta_);
  dg_ = storage.grad(gamma_);
  db_ = storage.grad(beta_);
  ASSIGN_OR_RETURN(y_, backend->Allocate(static_cast<size_t>(max_rows) *
                                         width_ * sizeof(float)));
  ASSIGN_OR_RETURN(mean_, backend->Allocate(max_rows * sizeof(float)));
  ASSIGN_OR_RETURN(rstd_, backend->Allocate(max_rows * sizeof(float)));
  return absl::OkStatus();
}

absl::Status LayerNorm::Forward(const float* x, int rows) {
  RETURN_IF_ERROR(CheckRows("LayerNorm", rows, max_rows_));
  x_ = x;
  rows_ = rows;
  backend_->LayerNormForward(rows, width_, eps_, x, g_, b_, y_.f32(),
                             mean_.f32(), rstd_.f32());
  return absl::OkStatus();
}

absl::Status LayerNorm::Backward(const float* dy, float* dx, float grad_beta) {
  if (x_ == nullptr) {
    return absl::FailedPreconditionError("LayerNorm: Backward before Forward");
  }
  backend_->LayerNormBackward(rows_, width_, x_, g_, mean_.f32(), rstd_.f32(),
                              dy, dx, dg_, db_, grad_beta);
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
