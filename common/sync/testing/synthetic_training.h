// Test-only: what the sync strategies' equivalence tests share — seeded
// synthetic data for an MLP or GPT spec, sliced into batches; the optimizer
// settings they train with; and the relative L2 difference they compare by.
//
//   SyntheticData d = MakeSyntheticData(spec, /*samples=*/256);
//   nn::Batch b = d.Slice(rank * batch, batch);
//   ASSIGN_OR_RETURN(auto opt, MakeTestOptimizer(/*adamw=*/true, {0, n}));
//   EXPECT_LE(RelativeDifference(ranks, reference), 1e-5);
//
// Deterministic (fixed seed): the same data in every process and rank.
#ifndef TANDEM_COMMON_SYNC_TESTING_SYNTHETIC_TRAINING_H_
#define TANDEM_COMMON_SYNC_TESTING_SYNTHETIC_TRAINING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/nn/model.h"
#include "common/nn/model_spec.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace sync_testing {

struct SyntheticData {
  int features_per_sample = 0;  // MLP input width, or 0 for GPT
  int context = 0;              // GPT context, or 0
  std::vector<float> features;  // [samples, features_per_sample]
  std::vector<int32_t> tokens;  // [samples, context]
  std::vector<int32_t> labels;  // [samples] or [samples, context]

  // Samples [first, first + count) as a batch (views into this object).
  nn::Batch Slice(int first, int count) const;
};

// MLP: N(0, 1) features and uniform labels; GPT: one uniform token stream,
// labels the next token. Seeded with 2024.
SyntheticData MakeSyntheticData(const nn::ModelSpec& spec, int samples);

// SGD (momentum 0.9, weight decay 1e-4) or AdamW (weight decay 0.01) over
// `range`, and the learning rate the tests step them with (0.1 / 1e-2).
absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeTestOptimizer(bool adamw,
                                                                     optim::ParamRange range);
optim::StepContext TestStepContext(bool adamw, int step);

// ||a - b|| / ||b|| in double (b's norm floored at 1e-30).
double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace sync_testing
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_TESTING_SYNTHETIC_TRAINING_H_
