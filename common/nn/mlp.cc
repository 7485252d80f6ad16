#include "common/nn/mlp.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/nn/init.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

using kernels::Activation;

MlpClassifier::MlpClassifier(const ModelSpec& spec, kernels::Backend* backend)
    : spec_(spec), backend_(backend), loss_(spec.mlp.widths.back()) {}

absl::StatusOr<std::unique_ptr<MlpClassifier>> MlpClassifier::Create(
    const ModelSpec& spec, kernels::Backend* backend,
    const ModelOptions& options) {
  if (spec.kind != ModelSpec::Kind::kMlp || spec.mlp.widths.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("MlpClassifier: not an MLP spec: ", spec.ToString()));
  }
  if (options.max_batch <= 0) {
    return absl::InvalidArgumentError("MlpClassifier: max_batch must be > 0");
  }
  std::unique_ptr<MlpClassifier> m(new MlpClassifier(spec, backend));
  const std::vector<int>& w = spec.mlp.widths;
  const int n = static_cast<int>(w.size()) - 1;
  for (int i = 0; i < n; ++i) {
    m->layers_.push_back(std::make_unique<Linear>(
        w[i], w[i + 1], i + 1 < n ? Activation::kRelu : Activation::kNone));
  }
  // Backward order: the last Linear first.
  for (int i = n - 1; i >= 0; --i) {
    m->layers_[i]->AddParams(absl::StrCat("fc", i), n - 1 - i, &m->layout_);
  }
  ASSIGN_OR_RETURN(m->storage_, tensor::FlatStorage::Create(backend, m->layout_));
  for (auto& layer : m->layers_) {
    RETURN_IF_ERROR(layer->Init(backend, m->storage_, options.max_batch));
  }
  RETURN_IF_ERROR(m->loss_.Init(backend, options.max_batch));
  for (int i = 0; i + 1 < n; ++i) {
    ASSIGN_OR_RETURN(kernels::DeviceBuffer b,
                     backend->Allocate(static_cast<size_t>(options.max_batch) *
                                       w[i + 1] * sizeof(float)));
    m->dacts_.push_back(std::move(b));
  }
  m->group_ranges_ = GroupRanges(m->layout_);
  // Layer i (forward order) is parameter group n - 1 - i.
  for (int i = 0; i < n; ++i) {
    const GradRange& r = m->group_ranges_[n - 1 - i];
    m->hook_ranges_.push_back({r.lo, r.hi});
  }
  RETURN_IF_ERROR(m->Initialize(options.seed));
  return m;
}

absl::Status MlpClassifier::Initialize(uint64_t seed) {
  InitRng rng(seed);
  std::vector<float> host(layout_.total_size(), 0.f);
  // Forward order so the values do not depend on the layout order.
  for (auto& layer : layers_) {
    const float bound = 1.f / std::sqrt(static_cast<float>(layer->in()));
    const tensor::ParameterInfo& wi = layout_.param(layer->weight_index());
    for (int64_t j = 0; j < wi.size; ++j) host[wi.offset + j] = rng.Uniform(-bound, bound);
    const tensor::ParameterInfo& bi = layout_.param(layer->bias_index());
    for (int64_t j = 0; j < bi.size; ++j) host[bi.offset + j] = rng.Uniform(-bound, bound);
  }
  return backend_->CopyToDevice(storage_.params(), host.data(),
                                host.size() * sizeof(float));
}

absl::Status MlpClassifier::Forward(const Batch& batch) {
  if (batch.features == nullptr || batch.labels == nullptr) {
    return absl::InvalidArgumentError(
        "MlpClassifier::Forward: the batch needs features and labels");
  }
  forward_done_ = false;
  const float* x = batch.features;
  for (size_t i = 0; i < layers_.size(); ++i) {
    RETURN_IF_ERROR(GatherLayer(static_cast<int>(i), tensor::ParamPass::kForward));
    const absl::Status s = layers_[i]->Forward(x, batch.size);
    ReleaseLayer(static_cast<int>(i), tensor::ParamPass::kForward);
    RETURN_IF_ERROR(s);
    x = layers_[i]->output();
  }
  RETURN_IF_ERROR(loss_.Forward(x, batch.labels, batch.size));
  forward_done_ = true;
  return absl::OkStatus();
}

absl::Status MlpClassifier::Backward(float grad_beta,
                                     const GradReadyCallback& on_ready,
                                     float loss_scale) {
  if (!forward_done_) {
    return absl::FailedPreconditionError(
        "MlpClassifier::Backward needs a successful Forward first");
  }
  RETURN_IF_ERROR(loss_.Backward(loss_scale));
  float* dy = loss_.dlogits();
  const int n = static_cast<int>(layers_.size());
  for (int i = n - 1; i >= 0; --i) {
    // The first layer's input gradient is never needed.
    float* dx = i > 0 ? dacts_[i - 1].f32() : nullptr;
    RETURN_IF_ERROR(GatherLayer(i, tensor::ParamPass::kBackward));
    const absl::Status s = layers_[i]->Backward(dy, dx, grad_beta);
    ReleaseLayer(i, tensor::ParamPass::kBackward);
    RETURN_IF_ERROR(s);
    if (on_ready) on_ready(group_ranges_[n - 1 - i]);
    dy = dx;
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
