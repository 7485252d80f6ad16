// TrainingPlan: what one generation will do, from the options, the dataset
// size, the world size and where training stands: the global batch, the
// steps left until the last epoch ends (or --max_steps), the learning-rate
// schedule scaled for this world, and the data stream's request at the
// cursor. A restored position in samples is where this world's global
// batches are cut from (StreamBatchesRequest.start_position), so a change of
// world size or batch neither loses nor repeats a sample.
//
//   ASSIGN_OR_RETURN(TrainingPlan plan, PlanGeneration({o, samples, world}, &state));
//   data::PrefetchOptions po = TrainStream(o, plan, state, rank, world, normalize, metrics);
//
// Thread-safe (pure functions). Failure: INVALID_ARGUMENT when the global
// batch exceeds the dataset (saying to lower --batch_size).
#ifndef TANDEM_SERVICES_WORKER_TRAINING_PLAN_H_
#define TANDEM_SERVICES_WORKER_TRAINING_PLAN_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "common/data/prefetch_client.h"
#include "common/nn/model_spec.h"
#include "common/optim/schedule.h"
#include "services/worker/checkpointer.h"
#include "services/worker/trainer_options.h"

namespace tandem {
namespace worker {

struct PlanInputs {
  const TrainerOptions& options;
  int64_t train_samples = 0;
  int world = 1;
  // Samples per micro-batch over all ranks (dynamic batch sizing); 0 =
  // batch_size x world. Per-rank slices differ by at most one sample.
  int64_t global_batch = 0;
};

struct TrainingPlan {
  int64_t global_batch = 0;     // batch_size * world, or PlanInputs::global_batch
  int64_t steps_per_epoch = 0;  // batches of global_batch per epoch
  int64_t total_steps = 0;      // optimizer steps at the end of the run
  int64_t steps_left = 0;
  optim::LrSchedule schedule;
};

// Also moves state->cursor to the restored sample position (its offset).
absl::StatusOr<TrainingPlan> PlanGeneration(const PlanInputs& in, TrainingState* state);

// The training stream for this rank from the cursor: shuffled, remainder
// dropped, steps_left * accumulation batches; u8 features normalised to f32
// when `normalize_to_f32` (InputSpec).
data::PrefetchOptions TrainStream(const TrainerOptions& o, const TrainingPlan& plan,
                                  const TrainingState& state, int rank, int world,
                                  bool normalize_to_f32, data::ClientMetrics* metrics);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_TRAINING_PLAN_H_
