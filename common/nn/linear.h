// Linear: y = act(x W^T + b) with W [out, in] (PyTorch's layout) and b [out],
// the bias add and activation fused into one pass (Backend's
// BiasActivationForward). Activation kNone gives a plain linear layer; kRelu
// and kGelu make the ReLU / GELU layers' usual place after a Linear free.
// See layer.h for the life cycle, ownership and errors.
#ifndef TANDEM_COMMON_NN_LINEAR_H_
#define TANDEM_COMMON_NN_LINEAR_H_

#include <string>

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"
#include "common/tensor/flat_storage.h"
#include "common/tensor/parameter_layout.h"

namespace tandem {
namespace nn {

class Linear {
 public:
  Linear(int in, int out, kernels::Activation act, bool bias = true)
      : in_(in), out_(out), act_(act), has_bias_(bias) {}
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;

  // Parameters in backward order: weight, then bias.
  void AddParams(const std::string& prefix, int group,
                 tensor::ParameterLayout* layout);
  absl::Status Init(kernels::Backend* backend,
                    const tensor::FlatStorage& storage, int max_rows);

  // x [rows, in] -> output() [rows, out].
  absl::Status Forward(const float* x, int rows);
  // dy [rows, out] -> dx [rows, in] (skipped when null) plus dW, db. dy is
  // overwritten with dy * act'(z) when act is not kNone; with kNone it is
  // left as is (so a residual gradient can be passed without a copy).
  absl::Status Backward(float* dy, float* dx, float grad_beta);

  float* output() const { return act_ == kernels::Activation::kNone ? z_.f32() : y_.f32(); }
  int in() const { return in_; }
  int out() const { return out_; }
  int weight_index() const { return weight_; }
  int bias_index() const { return bias_; }
  // Views of the parameters and their gradients.
  float* weight() const { return w_; }
  float* bias() const { return b_; }

 private:
  int in_, out_;
  kernels::Activation act_;
  bool has_bias_;
  int weight_ = -1, bias_ = -1;
  kernels::Backend* backend_ = nullptr;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  int max_rows_ = 0;
  int rows_ = 0;
  const float* x_ = nullptr;
  // Pre-activation (the output when act is kNone); with kGelu, the GELU's
  // derivative at it (BiasActivationForwardKeepGrad).
  kernels::DeviceBuffer z_;
  kernels::DeviceBuffer y_;  // activation output
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_LINEAR_H_
