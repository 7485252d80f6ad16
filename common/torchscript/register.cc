// Installs TorchScriptModel as nn::CreateModel's torchscript: factory when
// this target is linked (alwayslink): the worker and `tandem` link it when
// libtorch was found at build time.
#include "common/nn/model.h"
#include "common/torchscript/torchscript_model.h"

namespace tandem {
namespace torchscript {
namespace {

const bool kRegistered = nn::RegisterTorchScriptFactory(
    [](const nn::ModelSpec& spec, kernels::Backend* backend,
       const nn::ModelOptions& options) -> absl::StatusOr<std::unique_ptr<nn::Model>> {
      absl::StatusOr<std::unique_ptr<TorchScriptModel>> m =
          TorchScriptModel::Create(spec, backend, options);
      if (!m.ok()) return m.status();
      return std::unique_ptr<nn::Model>(std::move(*m));
    });

}  // namespace
}  // namespace torchscript
}  // namespace tandem
