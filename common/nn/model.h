// Model: a trainable network over flat parameter/gradient storage, built from
// a spec string (model_spec.h) by CreateModel.
//
//   ModelOptions opts;  opts.max_batch = 64;  opts.seed = 1;
//   ASSIGN_OR_RETURN(auto model, CreateModel("mlp:784,1024,10", backend, opts));
//   RETURN_IF_ERROR(model->Forward(batch));              // loss on device
//   RETURN_IF_ERROR(model->Backward(0.f, on_grad_ready));  // grads final
//   // optimizer steps model->storage().params() from .grads()
//
// Inputs are device pointers (copy host data in with the backend first):
// MLP: features [batch, in] fp32 and labels [batch]; GPT: tokens
// [batch, context] and next-token labels [batch, context] (int32, negative
// = ignored). Labels / tokens must be in range: they are not checked on
// the device (the data path validates them).
//
// Thread-compatible. The model owns its storage and activations; the
// Backend must outlive it. Errors: InvalidArgument for a malformed spec, a
// batch larger than max_batch or missing inputs; FailedPrecondition for
// Backward before Forward; ResourceExhausted if buffers cannot be allocated.
#ifndef TANDEM_COMMON_NN_MODEL_H_
#define TANDEM_COMMON_NN_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"
#include "common/nn/model_spec.h"
#include "common/tensor/flat_storage.h"
#include "common/tensor/param_hook.h"
#include "common/tensor/parameter_layout.h"

namespace tandem {
namespace nn {

// Element type of a batch's inputs (the dataset's feature dtype, or f32
// when the data server normalised u8 features).
enum class InputDType { kFloat32, kUInt8, kInt32, kInt64 };

// Most dimensions of one sample (matches common/data/dataset.h).
inline constexpr int kMaxSampleRank = 7;

// A per-sample shape in a fixed array, so a Batch is built per step without
// allocating. rank 0 = a scalar per sample (a class label).
struct SampleShape {
  int rank = 0;
  int64_t dims[kMaxSampleRank] = {};
  int64_t elements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
};

// One step's inputs, as device pointers (see the file comment). The worker
// fills every field for every dataset: the built-in models read `features`
// (MLP) or `tokens` (GPT) and `labels`; a model that takes any dtype and
// shape (e.g. a TorchScript module) reads the typed view `inputs`, which
// points at the same bytes: [size, *sample_shape] of inputs_dtype,
// row-major, with labels int32 [size, *label_shape]. Pointers are borrowed
// and valid until the next batch is staged.
struct Batch {
  int size = 0;                       // samples (sequences for GPT)
  const float* features = nullptr;    // MLP: [size, in]; null unless inputs are f32
  const int32_t* tokens = nullptr;    // GPT: [size, context]; null unless token windows
  const int32_t* labels = nullptr;    // MLP: [size]; GPT: [size, context]
  const void* inputs = nullptr;       // typed view: [size, *sample_shape]
  InputDType inputs_dtype = InputDType::kFloat32;
  SampleShape sample_shape;           // e.g. {1, 28, 28}; tokens: {context}
  SampleShape label_shape;            // {} (a class) or {context}
};

// What one sample of the training data is, as Forward receives it. The
// built-in models know it from their spec; a torchscript: module is checked
// against it (one forward and backward on zeros when it is created).
struct SampleSpec {
  bool tokens = false;          // token windows (int32, handed on as int64)
  InputDType dtype = InputDType::kFloat32;  // of Batch::inputs
  std::vector<int64_t> shape;   // per sample, e.g. {1, 28, 28}; tokens {context}
  std::vector<int64_t> label_shape;  // per sample: {} (a class) or {context}
  int num_classes = 0;          // the last dimension the logits must have
};

struct ModelOptions {
  // Largest batch Forward accepts; activations are sized for it once.
  int max_batch = 64;
  // Seed for the deterministic initialisation (same seed, same parameters,
  // on every backend and machine). A torchscript: module starts from the
  // weights saved in its file instead.
  uint64_t seed = 1;
  // torchscript: only (needed there; the built-in models ignore both).
  SampleSpec sample;
  int torch_threads = 1;  // torch's intra-op threads (process-wide)
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelSpec& spec() const = 0;
  // Parameters in backward order; grads share the layout.
  virtual const tensor::ParameterLayout& layout() const = 0;
  virtual tensor::FlatStorage& storage() = 0;

  // Runs the forward pass and the mean cross-entropy loss into loss().
  virtual absl::Status Forward(const Batch& batch) = 0;
  // Backward of the last Forward. grad_beta 0 overwrites the gradients, 1
  // adds to them. `on_ready` (may be null) is called once per parameter
  // group, in backward order, as soon as that group's gradients are final.
  // loss_scale multiplies the loss's gradient (fp16 loss scaling).
  virtual absl::Status Backward(float grad_beta,
                                const GradReadyCallback& on_ready,
                                float loss_scale = 1.f) = 0;

  // Device scalar: the last Forward's mean loss.
  virtual const float* loss() const = 0;
  // Device [rows, classes] softmax probabilities of the last Forward
  // (rows = batch for MLP, batch * context for GPT).
  virtual const float* probs() const = 0;
  virtual int num_classes() const = 0;
  virtual int rows_per_sample() const = 0;  // 1 for MLP, context for GPT

  // Re-initialises every parameter from `seed` (the same values the
  // constructor's seed gives).
  virtual absl::Status Initialize(uint64_t seed) = 0;

  // Training (the default) or evaluation: layers such as BatchNorm and
  // dropout behave differently, and evaluation builds no autograd graph.
  virtual void SetTraining(bool training) { (void)training; }

  // State that is not trained but belongs to the model (BatchNorm running
  // statistics: a torchscript: module's registered buffers), as bytes, so a
  // checkpoint carries it and rank 0 can broadcast it. Empty for models
  // without any; LoadBuffers takes what SaveBuffers gave (InvalidArgument
  // for bytes of another model).
  virtual std::string SaveBuffers() const { return std::string(); }
  virtual absl::Status LoadBuffers(absl::string_view bytes) {
    if (bytes.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError("this model has no buffers to load");
  }

  // The flat ranges the parameter hook is called with, one per layer, in
  // forward order (they tile [0, layout().total_size())).
  const std::vector<std::pair<int64_t, int64_t>>& param_hook_ranges() const {
    return hook_ranges_;
  }
  // Borrowed; nullptr (the default) = all parameters always resident.
  // Forward/Backward then call hook->Gather before and hook->Release after
  // each layer (tensor/param_hook.h). Initialize writes the whole vector
  // without it.
  void set_param_hook(tensor::ParamHook* hook) { hook_ = hook; }
  tensor::ParamHook* param_hook() const { return hook_; }

 protected:
  // Layer `i` of param_hook_ranges() is about to run / has run.
  absl::Status GatherLayer(int i, tensor::ParamPass pass) {
    if (hook_ == nullptr) return absl::OkStatus();
    return hook_->Gather(hook_ranges_[i].first, hook_ranges_[i].second, pass);
  }
  void ReleaseLayer(int i, tensor::ParamPass pass) {
    if (hook_ != nullptr) hook_->Release(hook_ranges_[i].first, hook_ranges_[i].second, pass);
  }

  std::vector<std::pair<int64_t, int64_t>> hook_ranges_;  // set by Create

 private:
  tensor::ParamHook* hook_ = nullptr;
};

// One GradRange per parameter group of `layout`, in group order. The ranges
// tile [0, layout.total_size()): each starts where the previous one ended
// (padding included), so gradient buckets built from them leave no gaps.
std::vector<GradRange> GroupRanges(const tensor::ParameterLayout& layout);

absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    absl::string_view spec, kernels::Backend* backend,
    const ModelOptions& options);

// torchscript: models are built by common/torchscript, which needs libtorch;
// linking its :register target installs the factory (without it,
// CreateModel refuses torchscript: saying what to install). Not
// thread-safe against concurrent CreateModel (static initialisation only).
using ModelFactory = std::function<absl::StatusOr<std::unique_ptr<Model>>(
    const ModelSpec&, kernels::Backend*, const ModelOptions&)>;
bool RegisterTorchScriptFactory(ModelFactory factory);
absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    const ModelSpec& spec, kernels::Backend* backend,
    const ModelOptions& options);

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_MODEL_H_
