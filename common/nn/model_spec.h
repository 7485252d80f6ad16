// Model specs: the strings that name a model, parsed into configs.
//
//   "mlp:784,1024,1024,10"      an MLP classifier: input width, hidden
//                               widths (ReLU), number of classes
//   "gpt:layers=2,heads=4,width=64,context=32,vocab=256"
//                               a GPT-style decoder LM (all five keys needed;
//                               width must be a multiple of heads)
//   "torchscript:PATH"          the user's own module, saved with
//                               torch.jit.save (common/torchscript; the
//                               path is not opened here)
//
// ParseModelSpec returns InvalidArgument naming the problem and the expected
// form for anything malformed. Thread-safe (pure functions).
#ifndef TANDEM_COMMON_NN_MODEL_SPEC_H_
#define TANDEM_COMMON_NN_MODEL_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace nn {

struct MlpConfig {
  std::vector<int> widths;  // {input, hidden..., classes}; at least 2 entries
};

struct GptConfig {
  int layers = 0;
  int heads = 0;
  int width = 0;
  int context = 0;
  int vocab = 0;
};

struct TorchScriptConfig {
  std::string path;  // a TorchScript archive (torch.jit.save)
};

struct ModelSpec {
  enum class Kind { kMlp, kGpt, kTorchScript };
  Kind kind = Kind::kMlp;
  MlpConfig mlp;
  GptConfig gpt;
  TorchScriptConfig torchscript;
  // Canonical spec string (round-trips through ParseModelSpec).
  std::string ToString() const;
};

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view spec);

// InvalidArgument, naming the strategies that work, for a pairing that
// cannot train: zero3 gathers each layer through Model::param_hook_ranges,
// which a torchscript: module (whose layers run inside TorchScript, where no
// C++ hook reaches) does not call.
absl::Status CheckModelSupportsStrategy(const ModelSpec& spec, absl::string_view strategy);

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_MODEL_SPEC_H_
