// Evaluator: at each epoch end every rank evaluates a 1/N slice of the eval
// dataset (streamed unshuffled, the last batch short) and the counts are
// summed over the control mesh, so every rank ends with the same numbers.
// MLP: accuracy over samples. GPT: mean next-token loss and token accuracy
// (labels < 0 are ignored).
//
//   Evaluator ev(options, backend, model, stager);
//   ASSIGN_OR_RETURN(EvalResult r, ev.Run(g));
//
// Thread-compatible (the trainer thread). Borrows everything; allocates its
// prediction buffers once. Failure: the data stream's or the model's Status;
// a failed sum is the control mesh's error.
#ifndef TANDEM_SERVICES_WORKER_EVALUATOR_H_
#define TANDEM_SERVICES_WORKER_EVALUATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/prefetch_client.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "services/worker/batch_stager.h"
#include "services/worker/generation.h"

namespace tandem {
namespace worker {

struct EvaluatorOptions {
  std::vector<std::string> data_servers;
  std::string dataset;        // empty: Run returns an empty result
  int64_t samples = 0;        // in the dataset
  int batch_size = 64;        // per rank
  bool normalize_to_f32 = false;  // InputSpec::normalize_to_f32
  data::ClientMetrics* metrics = nullptr;  // borrowed, optional
};

struct EvalResult {
  int64_t samples = 0;     // evaluated, over all ranks
  double accuracy = -1;    // samples (MLP) or tokens (GPT) predicted right
  double loss = 0;         // mean loss per sample (MLP) or token (GPT)
};

// "epoch 1 test accuracy 0.8612 (10000 samples)" (MLP) or
// "epoch 1 eval loss 1.9021 token accuracy 0.4410 (512 sequences)" (GPT);
// `when` is what leads the line ("epoch 1", or "final (step 300)" for a run that
// --max_steps ended inside an epoch).
std::string FormatEvalLine(const EvalResult& r, const std::string& when, InputSpec::Kind kind);

class Evaluator {
 public:
  Evaluator(EvaluatorOptions options, kernels::Backend* backend, nn::Model* model,
            BatchStager* stager)
      : o_(std::move(options)), backend_(backend), model_(model), stager_(stager) {}
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  absl::StatusOr<EvalResult> Run(Generation& g);

 private:
  const EvaluatorOptions o_;
  kernels::Backend* const backend_;
  nn::Model* const model_;
  BatchStager* const stager_;
  std::vector<int32_t> predictions_;
  int32_t* device_predictions_ = nullptr;  // device backends only
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_EVALUATOR_H_
