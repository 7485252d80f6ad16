#include "common/plan/model_cost.h"

#include "absl/strings/str_cat.h"

namespace tandem {
namespace plan {
namespace {

// One parameter group: `elements` parameters, `gemm_flops` forward FLOPs per
// sample, `activations` floats kept per sample.
struct Group {
  std::vector<std::vector<int64_t>> params;  // shapes, in layout order
  double gemm_flops;
  double activations;
  // Backward GEMMs relative to forward: 2 (weight and input gradients), 1
  // for the MLP's first layer, whose input gradient is never computed.
  double backward_factor = 2;
  bool embedding = false;
};

// Offsets in the flat vector are multiples of ParameterLayout::kAlignElems.
constexpr int64_t kAlign = 16;

// Each parameter starts at an aligned offset; the padding before it belongs
// to its group, and the vector ends where its last parameter ends
// (tensor::ParameterLayout, nn::GroupRanges).
void Finish(const std::vector<Group>& backward_order, ModelCost* c) {
  int64_t end = 0;  // where the previous parameter ended
  for (const Group& g : backward_order) {
    const int64_t lo = end;
    for (const std::vector<int64_t>& shape : g.params) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      c->parameters += n;
      end = (end + kAlign - 1) / kAlign * kAlign + n;
    }
    c->groups_backward.push_back(end - lo);
    c->shapes_backward.push_back(g.params);
    c->embeddings_backward.push_back(g.embedding);
    c->backward_flops.push_back(g.backward_factor * g.gemm_flops);
    c->forward_flops += g.gemm_flops;
    c->train_flops += (1 + g.backward_factor) * g.gemm_flops;
    c->activation_floats += g.activations;
  }
  c->flat_size = end;
}

absl::StatusOr<ModelCost> MlpCost(const nn::MlpConfig& m) {
  ModelCost c;
  std::vector<Group> groups;
  for (size_t i = m.widths.size() - 1; i >= 1; --i) {
    const double in = m.widths[i - 1], out = m.widths[i];
    // Linear(in, out) with bias; keeps its input and its output.
    const int64_t ni = m.widths[i - 1], no = m.widths[i];
    groups.push_back({{{no, ni}, {no}}, 2 * in * out, in + out, i == 1 ? 1.0 : 2.0});
  }
  Finish(groups, &c);
  return c;
}

absl::StatusOr<ModelCost> GptCost(const nn::GptConfig& g) {
  ModelCost c;
  c.rows_per_sample = g.context;
  const double t = g.context, w = g.width, v = g.vocab;
  std::vector<Group> groups;
  // Backward order as gpt.h documents it: head, lnf, then per block from the
  // last: fc2, fc1, ln2, attn.proj, attn.qkv, ln1; embeddings last.
  const int64_t W = g.width, V = g.vocab, T = g.context;
  groups.push_back({{{V, W}}, t * 2 * w * v, t * (w + v)});  // head, no bias
  groups.push_back({{{W}, {W}}, 0, t * w});                  // lnf
  for (int l = 0; l < g.layers; ++l) {
    groups.push_back({{{W, 4 * W}, {W}}, t * 2 * 4 * w * w, t * 4 * w});      // fc2
    groups.push_back({{{4 * W, W}, {4 * W}}, t * 2 * 4 * w * w, t * 4 * w});  // fc1
    groups.push_back({{{W}, {W}}, 0, t * w});                                // ln2
    // proj; attention's QK^T and AV (causal: half the t x t scores) count here.
    groups.push_back(
        {{{W, W}, {W}}, t * 2 * w * w + 2 * (t * t * w), t * w + g.heads * t * t / 2});
    groups.push_back({{{3 * W, W}, {3 * W}}, t * 2 * 3 * w * w, t * 4 * w});  // qkv
    groups.push_back({{{W}, {W}}, 0, t * w});                                // ln1
  }
  groups.push_back({{{V, W}, {T, W}}, 0, t * w, 2, /*embedding=*/true});  // token, position
  Finish(groups, &c);
  return c;
}

}  // namespace

absl::StatusOr<ModelCost> ModelCostOf(const nn::ModelSpec& spec) {
  if (spec.kind == nn::ModelSpec::Kind::kTorchScript) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model cost: ", spec.ToString(), " is a TorchScript module, whose per-layer FLOPs and "
        "activations tandem plan cannot read from the archive; plan with an mlp: or gpt: spec of "
        "the same parameter count, or measure the module with tandem local --autotune"));
  }
  if (spec.kind == nn::ModelSpec::Kind::kMlp) {
    if (spec.mlp.widths.size() < 2) {
      return absl::InvalidArgumentError("model cost: an MLP needs at least two widths");
    }
    for (int w : spec.mlp.widths) {
      if (w <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("model cost: MLP width ", w, " must be positive (", spec.ToString(), ")"));
      }
    }
    return MlpCost(spec.mlp);
  }
  const nn::GptConfig& g = spec.gpt;
  if (g.layers <= 0 || g.heads <= 0 || g.width <= 0 || g.context <= 0 || g.vocab <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model cost: every GPT size must be positive (", spec.ToString(), ")"));
  }
  return GptCost(g);
}

}  // namespace plan
}  // namespace tandem
