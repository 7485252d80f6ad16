// ModelCost: what one model spec costs per sample, computed from the spec
// alone (no allocation, so a 100-billion-parameter spec is as cheap as the
// MLP): parameter count, parameter groups in backward order (the order
// gradient buckets become ready), training FLOPs per sample and activation
// floats per sample.
//
//   ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec("mlp:784,1024,10"));
//   ASSIGN_OR_RETURN(ModelCost c, ModelCostOf(spec));
//   c.parameters;        // 784*1024 + 1024 + 1024*10 + 10
//   c.train_flops;       // per sample: forward + backward GEMMs
//
// FLOPs count the GEMMs (2 per multiply-add); forward = 2 * params-in-GEMMs
// per row (plus attention's QK^T and AV), backward = 2 * forward (input and
// weight gradients), except the MLP's first layer, which computes no input
// gradient (mlp.cc). Element-wise work (activations, layer norms, softmax)
// is not counted: at the sizes worth planning for it is a few percent.
// Thread-safe (pure function). InvalidArgument for a spec with a
// non-positive width.
#ifndef TANDEM_COMMON_PLAN_MODEL_COST_H_
#define TANDEM_COMMON_PLAN_MODEL_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/nn/model_spec.h"

namespace tandem {
namespace plan {

struct ModelCost {
  int64_t parameters = 0;  // the model's parameter count
  // Length of the flat fp32 vector: every parameter starts at a multiple of
  // 16 elements (tensor::ParameterLayout), so this is what sync moves.
  int64_t flat_size = 0;
  // Flat elements per parameter group (padding included), in backward
  // order (the model's groups: the last layer first); sums to flat_size.
  std::vector<int64_t> groups_backward;
  // FLOPs per group's backward, same order: when each bucket is ready.
  std::vector<double> backward_flops;
  // Each group's parameter shapes, same order ({rows, cols} for a matrix,
  // {elements} for a vector), as the model's layout holds them: what
  // low-rank compression (PowerSGD) can factor.
  std::vector<std::vector<std::vector<int64_t>>> shapes_backward;
  // Whether each group holds embedding tables (the GPT's token and
  // position tables), same order: PowerSGD sends them uncompressed
  // (embeddings=0, its default).
  std::vector<bool> embeddings_backward;
  double forward_flops = 0;  // per sample
  double train_flops = 0;    // per sample: forward + backward
  // Floats kept from forward for backward, per sample (the activations).
  double activation_floats = 0;
  int rows_per_sample = 1;   // 1 (MLP) or context (GPT tokens)
};

absl::StatusOr<ModelCost> ModelCostOf(const nn::ModelSpec& spec);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_MODEL_COST_H_
