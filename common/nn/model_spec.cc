#include "common/nn/model_spec.h"

#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tandem {
namespace nn {
namespace {

constexpr char kForms[] =
    "expected \"mlp:IN,HIDDEN...,CLASSES\" (e.g. mlp:784,1024,1024,10) or "
    "\"gpt:layers=L,heads=H,width=W,context=T[,vocab=V]\" (width may be written d=, context "
    "ctx=; vocab defaults to 256) or \"torchscript:PATH\" (a module saved with torch.jit.save)";
constexpr int kMaxDim = 1 << 20;

absl::Status Bad(absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("model spec \"", spec, "\": ", why, "; ", kForms));
}

absl::StatusOr<int> ParsePositive(absl::string_view spec,
                                  absl::string_view what,
                                  absl::string_view text) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v <= 0 || v > kMaxDim) {
    return Bad(spec, absl::StrCat(what, " \"", text,
                                  "\" is not an integer in 1..", kMaxDim));
  }
  return v;
}

}  // namespace

std::string ModelSpec::ToString() const {
  if (kind == Kind::kMlp) return absl::StrCat("mlp:", absl::StrJoin(mlp.widths, ","));
  if (kind == Kind::kTorchScript) return absl::StrCat("torchscript:", torchscript.path);
  return absl::StrCat("gpt:layers=", gpt.layers, ",heads=", gpt.heads,
                      ",width=", gpt.width, ",context=", gpt.context,
                      ",vocab=", gpt.vocab);
}

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view spec) {
  ModelSpec out;
  absl::string_view rest = absl::StripAsciiWhitespace(spec);
  if (absl::ConsumePrefix(&rest, "mlp:")) {
    out.kind = ModelSpec::Kind::kMlp;
    for (absl::string_view part : absl::StrSplit(rest, ',')) {
      absl::StatusOr<int> w = ParsePositive(spec, "width", part);
      if (!w.ok()) return w.status();
      out.mlp.widths.push_back(*w);
    }
    if (out.mlp.widths.size() < 2) {
      return Bad(spec, "an MLP needs at least an input width and a class count");
    }
    return out;
  }
  if (absl::ConsumePrefix(&rest, "gpt:")) {
    out.kind = ModelSpec::Kind::kGpt;
    std::map<std::string, int*> keys = {{"layers", &out.gpt.layers},
                                        {"heads", &out.gpt.heads},
                                        {"width", &out.gpt.width},
                                        {"context", &out.gpt.context},
                                        {"vocab", &out.gpt.vocab}};
    // Short spellings: gpt:layers=4,d=256,heads=4,ctx=128 (vocab defaults
    // to 256, byte-level text).
    const std::map<std::string, std::string> aliases = {{"d", "width"}, {"ctx", "context"}};
    for (absl::string_view part : absl::StrSplit(rest, ',')) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(part, absl::MaxSplits('=', 1));
      std::string key(kv.first);
      if (auto a = aliases.find(key); a != aliases.end()) key = a->second;
      auto it = keys.find(key);
      if (it == keys.end()) {
        return Bad(spec, absl::StrCat("unknown key \"", kv.first, "\""));
      }
      if (*it->second != 0) {
        return Bad(spec, absl::StrCat("key \"", kv.first, "\" given twice"));
      }
      absl::StatusOr<int> v = ParsePositive(spec, kv.first, kv.second);
      if (!v.ok()) return v.status();
      *it->second = *v;
    }
    if (out.gpt.vocab == 0) out.gpt.vocab = 256;
    for (const auto& [name, value] : keys) {
      if (*value == 0) return Bad(spec, absl::StrCat("missing key \"", name, "\""));
    }
    if (out.gpt.width % out.gpt.heads != 0) {
      return Bad(spec, absl::StrCat("width ", out.gpt.width,
                                    " is not a multiple of heads ",
                                    out.gpt.heads));
    }
    return out;
  }
  if (absl::ConsumePrefix(&rest, "torchscript:")) {
    out.kind = ModelSpec::Kind::kTorchScript;
    if (rest.empty()) return Bad(spec, "torchscript: needs the path of the saved module");
    out.torchscript.path = std::string(rest);
    return out;
  }
  return Bad(spec, "unknown model kind");
}

absl::Status CheckModelSupportsStrategy(const ModelSpec& spec, absl::string_view strategy) {
  if (spec.kind == ModelSpec::Kind::kTorchScript && strategy == "zero3") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync zero3 cannot train a torchscript: model: zero3 gathers each layer's "
        "parameters just before the layer runs, and a TorchScript module's layers run inside "
        "TorchScript where tandem cannot hook them; use allreduce (hier=1 too), compressed, "
        "zero1, zero2, ps or hybrid"));
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
