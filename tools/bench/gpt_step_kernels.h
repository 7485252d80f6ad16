// The Backend calls one CPU worker's GptModel (common/nn/gpt.cc) makes in a
// training step, each as a closure over buffers of the model's sizes, with
// how often a step runs it and the FLOP / bytes it does per call, for
// gpt_breakdown_bench. Kept in step with gpt.cc and attention.cc by hand:
// when a layer changes the kernels it calls, change the list here too.
//
//   ASSIGN_OR_RETURN(std::vector<StepKernel> ks, GptStepKernels(cfg, 8, &backend));
//   for (const StepKernel& k : ks) k.run();
//
// The closures share the buffers (held by shared_ptr), so the list may
// outlive the call; the backend must outlive the list. Not thread-safe.
#ifndef TANDEM_TOOLS_BENCH_GPT_STEP_KERNELS_H_
#define TANDEM_TOOLS_BENCH_GPT_STEP_KERNELS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/nn/model_spec.h"

namespace tandem {
namespace bench {

struct StepKernel {
  std::string name;
  int count = 1;      // calls per training step
  double flop = 0;    // per call; 0 for memory-bound kernels
  double bytes = 0;   // fp32 bytes read + written per call (compulsory)
  std::function<void()> run;
};

// In step order: forward kernels, then backward ones. ResourceExhausted if
// the buffers cannot be allocated.
absl::StatusOr<std::vector<StepKernel>> GptStepKernels(const nn::GptConfig& config, int batch,
                                                       kernels::Backend* backend);

}  // namespace bench
}  // namespace tandem

#endif  // TANDEM_TOOLS_BENCH_GPT_STEP_KERNELS_H_
