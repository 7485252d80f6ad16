// MlpClassifier: Linear+ReLU hidden layers, a final Linear and softmax
// cross-entropy, e.g. "mlp:784,1024,1024,10". Initialised like PyTorch's
// nn.Linear (weights and biases uniform in +-1/sqrt(fan_in)), from the seed.
// One parameter group per Linear, last layer first. See model.h.
#ifndef TANDEM_COMMON_NN_MLP_H_
#define TANDEM_COMMON_NN_MLP_H_

#include <memory>
#include <vector>

#include "common/nn/linear.h"
#include "common/nn/model.h"
#include "common/nn/softmax_cross_entropy.h"

namespace tandem {
namespace nn {

class MlpClassifier final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<MlpClassifier>> Create(
      const ModelSpec& spec, kernels::Backend* backend,
      const ModelOptions& options);

  const ModelSpec& spec() const override { return spec_; }
  const tensor::ParameterLayout& layout() const override { return layout_; }
  tensor::FlatStorage& storage() override { return storage_; }
  absl::Status Forward(const Batch& batch) override;
  absl::Status Backward(float grad_beta, const GradReadyCallback& on_ready,
                        float loss_scale) override;
  const float* loss() const override { return loss_.loss(); }
  const float* probs() const override { return loss_.probs(); }
  int num_classes() const override { return spec_.mlp.widths.back(); }
  int rows_per_sample() const override { return 1; }
  absl::Status Initialize(uint64_t seed) override;
  // Logits [batch, classes] of the last Forward.
  const float* logits() const { return layers_.back()->output(); }

 private:
  MlpClassifier(const ModelSpec& spec, kernels::Backend* backend);

  ModelSpec spec_;
  kernels::Backend* backend_;
  std::vector<std::unique_ptr<Linear>> layers_;  // forward order
  tensor::ParameterLayout layout_;
  tensor::FlatStorage storage_;
  SoftmaxCrossEntropy loss_;
  std::vector<kernels::DeviceBuffer> dacts_;  // gradient wrt hidden outputs
  std::vector<GradRange> group_ranges_;
  bool forward_done_ = false;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_MLP_H_
