// SoftmaxCrossEntropy: mean cross-entropy of softmax(logits) against integer
// labels, fused (one pass for probabilities and loss, one for the gradient).
// Rows whose label is negative are ignored (padding) but still count in the
// mean's denominator, which is the number of rows. Labels must be < classes
// (validated by the data path; see embedding.h for why).
// See layer.h for the life cycle, ownership and errors.
#ifndef TANDEM_COMMON_NN_SOFTMAX_CROSS_ENTROPY_H_
#define TANDEM_COMMON_NN_SOFTMAX_CROSS_ENTROPY_H_

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"

namespace tandem {
namespace nn {

class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(int classes) : classes_(classes) {}
  SoftmaxCrossEntropy(const SoftmaxCrossEntropy&) = delete;
  SoftmaxCrossEntropy& operator=(const SoftmaxCrossEntropy&) = delete;

  absl::Status Init(kernels::Backend* backend, int max_rows);
  // logits [rows, classes], labels [rows] -> loss() (device scalar) and
  // probs() [rows, classes].
  absl::Status Forward(const float* logits, const int32_t* labels, int rows);
  // d(loss_scale * loss)/dlogits into dlogits() [rows, classes].
  absl::Status Backward(float loss_scale = 1.f);

  float* loss() const { return loss_.f32(); }
  float* probs() const { return probs_.f32(); }
  float* dlogits() const { return dlogits_.f32(); }

 private:
  int classes_;
  kernels::Backend* backend_ = nullptr;
  int max_rows_ = 0, rows_ = 0;
  const int32_t* labels_ = nullptr;
  kernels::DeviceBuffer probs_, dlogits_, loss_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_SOFTMAX_CROSS_ENTROPY_H_
