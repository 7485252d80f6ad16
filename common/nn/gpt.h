// GptModel: a GPT-2-style decoder-only language model,
//   x = token + position embedding
//   per block: x += attn(LN1(x)); x += fc2(gelu(fc1(LN2(x))))   (pre-LN)
//   logits = head(LNf(x)); loss = mean next-token cross-entropy
// from "gpt:layers=L,heads=H,width=W,context=T,vocab=V" (MLP width 4W, an
// untied output head without bias). Initialised as GPT-2: N(0, 0.02)
// weights, residual projections scaled by 1/sqrt(2L), zero biases, LayerNorm
// gain 1. Parameter groups in backward order: head, lnf, then for each
// block from the last: fc2, fc1, ln2, attn.proj, attn.qkv, ln1; embeddings
// last. Sequences are always `context` long. See model.h.
#ifndef TANDEM_COMMON_NN_GPT_H_
#define TANDEM_COMMON_NN_GPT_H_

#include <memory>
#include <vector>

#include "common/nn/attention.h"
#include "common/nn/embedding.h"
#include "common/nn/layer_norm.h"
#include "common/nn/linear.h"
#include "common/nn/model.h"
#include "common/nn/softmax_cross_entropy.h"

namespace tandem {
namespace nn {

class GptModel final : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<GptModel>> Create(
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
  int num_classes() const override { return spec_.gpt.vocab; }
  int rows_per_sample() const override { return spec_.gpt.context; }
  absl::Status Initialize(uint64_t seed) override;

 private:
  struct Block {
    Block(const GptConfig& c);
    LayerNorm ln1;
    CausalSelfAttention attn;
    LayerNorm ln2;
    Linear fc1, fc2;
  };
  GptModel(const ModelSpec& spec, kernels::Backend* backend);
  // Hook units in forward order: 0 embed; block l's ln1, attn, ln2, fc1,
  // fc2 at BlockUnit(l) + 0..4; ln_f at BlockUnit(layers), head after it.
  static int BlockUnit(int l) { return 1 + 5 * l; }
  // Gathers unit `u`'s parameters, runs `f`, releases them.
  template <typename F>
  absl::Status Run(int u, tensor::ParamPass pass, F&& f) {
    if (param_hook() == nullptr) return f();
    if (absl::Status s = GatherLayer(u, pass); !s.ok()) return s;
    absl::Status s = f();
    ReleaseLayer(u, pass);
    return s;
  }

  ModelSpec spec_;
  kernels::Backend* backend_;
  Embedding embedding_;
  std::vector<std::unique_ptr<Block>> blocks_;
  LayerNorm ln_f_;
  Linear head_;
  SoftmaxCrossEntropy loss_;
  tensor::ParameterLayout layout_;
  tensor::FlatStorage storage_;
  std::vector<GradRange> group_ranges_;
  // Residual stream after each sub-layer: 2 * layers buffers [rows, width]
  // (the stream before block 0 is the embedding's output).
  std::vector<kernels::DeviceBuffer> residual_;
  // Backward scratch: the running residual gradient, two [rows, width]
  // temporaries and one [rows, 4 * width].
  kernels::DeviceBuffer d_residual_, tmp1_, tmp2_, d_hidden_;
  int batch_ = 0;
  bool forward_done_ = false;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_GPT_H_
