// Stand-alone element-wise activation layer (ReLU or GELU, tanh form) with no
// parameters: y = act(x), dx = dy * act'(x). Linear fuses the same
// activations after its bias; use this one where nothing precedes it.
// See layer.h for the life cycle, ownership and errors.
#ifndef TANDEM_COMMON_NN_ACTIVATION_H_
#define TANDEM_COMMON_NN_ACTIVATION_H_

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"

namespace tandem {
namespace nn {

class ActivationLayer {
 public:
  ActivationLayer(kernels::Activation act, int width) : act_(act), width_(width) {}
  ActivationLayer(const ActivationLayer&) = delete;
  ActivationLayer& operator=(const ActivationLayer&) = delete;

  absl::Status Init(kernels::Backend* backend, int max_rows);
  // x [rows, width] -> output() [rows, width].
  absl::Status Forward(const float* x, int rows);
  // dy [rows, width] -> dx [rows, width] (dx may alias dy).
  absl::Status Backward(const float* dy, float* dx);
  float* output() const { return y_.f32(); }

 private:
  kernels::Activation act_;
  int width_;
  kernels::Backend* backend_ = nullptr;
  int max_rows_ = 0, rows_ = 0;
  const float* x_ = nullptr;
  kernels::DeviceBuffer y_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_ACTIVATION_H_
