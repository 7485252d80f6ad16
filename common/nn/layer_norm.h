// LayerNorm over the last dimension with learned gain and bias
// (gamma initialised to 1, beta to 0 by the model's initialiser).
// See layer.h for the life cycle, ownership and errors.
#ifndef TANDEM_COMMON_NN_LAYER_NORM_H_
#define TANDEM_COMMON_NN_LAYER_NORM_H_

#include <string>

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"
#include "common/tensor/flat_storage.h"
#include "common/tensor/parameter_layout.h"

namespace tandem {
namespace nn {

class LayerNorm {
 public:
  explicit LayerNorm(int width, float eps = 1e-5f) : width_(width), eps_(eps) {}
  LayerNorm(const LayerNorm&) = delete;
  LayerNorm& operator=(const LayerNorm&) = delete;

  // Parameters: gamma ("<prefix>.weight"), beta ("<prefix>.bias").
  void AddParams(const std::string& prefix, int group,
                 tensor::ParameterLayout* layout);
  absl::Status Init(kernels::Backend* backend,
                    const tensor::FlatStorage& storage, int max_rows);
  // x [rows, width] -> output() [rows, width].
  absl::Status Forward(const float* x, int rows);
  // dy -> dx (overwritten; must not alias dy), dgamma, dbeta.
  absl::Status Backward(const float* dy, float* dx, float grad_beta);
  float* output() const { return y_.f32(); }
  int gamma_index() const { return gamma_; }
  int beta_index() const { return beta_; }

 private:
  int width_;
  float eps_;
  int gamma_ = -1, beta_ = -1;
  kernels::Backend* backend_ = nullptr;
  float *g_ = nullptr, *b_ = nullptr, *dg_ = nullptr, *db_ = nullptr;
  int max_rows_ = 0, rows_ = 0;
  const float* x_ = nullptr;
  kernels::DeviceBuffer y_, mean_, rstd_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_LAYER_NORM_H_
