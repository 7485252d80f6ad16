// TorchScriptModel: the user's own module (torch.jit.save) trained as an
// nn::Model, its parameters and gradients living in tandem's flat storage so
// that every gradient strategy works on it unchanged.
//
//   nn::ModelOptions o;  o.sample = {false, {784}, 10};
//   ASSIGN_OR_RETURN(auto m, TorchScriptModel::Create(spec, &cpu_backend, o));
//   RETURN_IF_ERROR(m->Forward(batch));
//   RETURN_IF_ERROR(m->Backward(0.f, on_ready));   // on_ready per parameter
//
// The contract (docs/user-guide.md, "Your own model"): forward(inputs) takes
// one tensor [B, *sample shape] (f32 features, or int64 tokens) and returns
// logits [B, C] or [B, T, C], C = the dataset's classes; the loss is the
// mean cross-entropy against the labels (negative labels ignored), unless
// the module has a method loss(inputs, labels) -> scalar, used instead.
//
// How: each parameter is re-pointed (set_data) at a view of the flat
// parameter vector and its .grad pre-set to a view of the flat gradient
// vector, which backward accumulates into in place (zeroed in place, never
// set to none). Readiness comes from post-hooks on each parameter's gradient
// accumulator (where DDP's Reducer hooks), so on_ready fires while backward
// runs. The flat order is the order gradients became ready in one probe
// forward + backward on zeros at creation (the module's buffers are put back
// afterwards): buckets fill in the order backward finishes them. Registered
// buffers (BatchNorm statistics) are SaveBuffers / LoadBuffers bytes.
//
// Create fails with InvalidArgument naming the file and the problem: no
// such file, not a TorchScript archive, forward not taking one tensor, no
// parameters, non-float32 or frozen parameters, the probe forward's error
// (wrapped, the module's message attached), or logits whose shape does not
// fit the dataset. Thread-compatible (torch's autograd runs backward on the
// calling thread for CPU tensors). Owns the module and the flat storage;
// the Backend must outlive it. The parameters go where the backend's memory
// is: a CUDA libtorch with a CUDA backend puts the module on the GPU;
// Debian's libtorch is CPU-only, and a device backend is refused there.
#ifndef TANDEM_COMMON_TORCHSCRIPT_TORCHSCRIPT_MODEL_H_
#define TANDEM_COMMON_TORCHSCRIPT_TORCHSCRIPT_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"

namespace tandem {
namespace torchscript {

class TorchScriptModel : public nn::Model {
 public:
  static absl::StatusOr<std::unique_ptr<TorchScriptModel>> Create(
      const nn::ModelSpec& spec, kernels::Backend* backend, const nn::ModelOptions& options);
  ~TorchScriptModel() override;
  TorchScriptModel(const TorchScriptModel&) = delete;
  TorchScriptModel& operator=(const TorchScriptModel&) = delete;

  const nn::ModelSpec& spec() const override { return spec_; }
  const tensor::ParameterLayout& layout() const override { return layout_; }
  tensor::FlatStorage& storage() override { return storage_; }
  absl::Status Forward(const nn::Batch& batch) override;
  absl::Status Backward(float grad_beta, const nn::GradReadyCallback& on_ready,
                        float loss_scale = 1.f) override;
  const float* loss() const override;
  // Softmax of the last Forward's logits, [rows, classes].
  const float* probs() const override;
  int num_classes() const override { return num_classes_; }
  int rows_per_sample() const override { return rows_per_sample_; }
  // Back to the weights and buffers the file held (the seed is not used).
  absl::Status Initialize(uint64_t seed) override;
  void SetTraining(bool training) override;
  std::string SaveBuffers() const override;
  absl::Status LoadBuffers(absl::string_view bytes) override;

  // Module parameter names in flat (readiness) order.
  std::vector<std::string> ParameterNames() const;
  // Whether the module exports loss(inputs, labels).
  bool has_loss_method() const;

  // The libtorch side (defined in the .cc only, so this header needs no
  // libtorch include).
  struct Impl;

 private:
  TorchScriptModel(nn::ModelSpec spec, kernels::Backend* backend);
  // One forward + backward on a batch of zeros: checks the module against
  // the samples and re-lays the flat storage in gradient-readiness order.
  absl::Status ProbeReadiness();
  void SetHookRanges();

  nn::ModelSpec spec_;
  kernels::Backend* backend_;
  tensor::ParameterLayout layout_;
  tensor::FlatStorage storage_;
  int num_classes_ = 0;
  int rows_per_sample_ = 1;
  std::unique_ptr<Impl> impl_;
};

}  // namespace torchscript
}  // namespace tandem

#endif  // TANDEM_COMMON_TORCHSCRIPT_TORCHSCRIPT_MODEL_H_
