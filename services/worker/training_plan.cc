#include "services/worker/training_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/data/sampler.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

absl::StatusOr<TrainingPlan> PlanGeneration(const PlanInputs& in, TrainingState* state) {
  const TrainerOptions& o = in.options;
  const int64_t global_batch =
      in.global_batch > 0 ? in.global_batch : int64_t{o.batch_size} * in.world;
  if (global_batch > in.train_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", global_batch, " (",
        in.global_batch > 0 ? absl::StrCat("--batch auto / --batch_schedule over ", in.world)
                            : absl::StrCat(o.batch_size, " x ", in.world),
        " workers) exceeds the dataset's ", in.train_samples,
        " samples: lower --batch_size (or the --batch range)"));
  }
  if (global_batch < in.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", global_batch, " leaves some of the ", in.world,
        " workers without a sample: raise the --batch minimum or --batch_schedule size"));
  }
  if ((global_batch + in.world - 1) / in.world > LocalBatchCapacity(o)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", global_batch, " over ", in.world, " workers exceeds the per-worker "
        "capacity ", LocalBatchCapacity(o), " the buffers were sized for"));
  }
  data::SamplerConfig sc;
  sc.num_samples = in.train_samples;
  sc.global_batch_size = global_batch;
  sc.world_size = in.world;
  sc.remainder = data::Remainder::kDrop;
  const int64_t per_epoch = data::StepsPerEpoch(sc);
  // The exact sample the last generation stopped at, whatever its world
  // size or batch: this world's global batches are cut from there.
  state->cursor = data::CursorAt(sc, state->cursor.epoch, state->samples_in_epoch);
  if (state->cursor.offset == 0) state->samples_in_epoch = 0;  // the next epoch
  // Batches left until the end of the last epoch; the run ends with the
  // last whole optimizer step.
  int64_t batches_left = 0;
  if (state->cursor.epoch < o.epochs) {
    batches_left = data::StepsInEpoch(sc, state->cursor.offset) +
                   (o.epochs - state->cursor.epoch - 1) * per_epoch;
  }
  int64_t total = state->step + batches_left / o.accumulation;
  if (o.max_steps > 0) total = std::min(total, o.max_steps);

  ASSIGN_OR_RETURN(optim::ScalingRule rule, optim::ParseScalingRule(o.lr_scaling));
  // Samples per optimizer step now, over the batch the lr was tuned for:
  // recomputed every generation, so a world-size change rescales it.
  const int64_t step_batch = global_batch * o.accumulation;
  const int64_t reference =
      o.lr_reference_batch > 0 ? o.lr_reference_batch : int64_t{o.batch_size} * o.accumulation;
  ASSIGN_OR_RETURN(double base_lr,
                   optim::ScaleLearningRate(o.lr, static_cast<double>(step_batch) / reference, rule));
  optim::LrScheduleOptions lo;
  ASSIGN_OR_RETURN(lo.kind, optim::ParseScheduleKind(o.schedule));
  lo.base_lr = base_lr;
  lo.total_steps = std::max<int64_t>(total, 1);
  lo.warmup_steps = std::min(o.warmup_steps, lo.kind == optim::ScheduleKind::kConstant
                                                 ? o.warmup_steps
                                                 : lo.total_steps - 1);
  if (lo.kind != optim::ScheduleKind::kConstant && lo.total_steps <= lo.warmup_steps) {
    lo.kind = optim::ScheduleKind::kConstant;  // a run of one step has nothing to decay
  }
  ASSIGN_OR_RETURN(optim::LrSchedule schedule, optim::LrSchedule::Create(lo));
  return TrainingPlan{global_batch, per_epoch, total, std::max<int64_t>(0, total - state->step),
                      schedule};
}

data::PrefetchOptions TrainStream(const TrainerOptions& o, const TrainingPlan& plan,
                                  const TrainingState& state, int rank, int world,
                                  bool normalize_to_f32, data::ClientMetrics* metrics) {
  data::PrefetchOptions po;
  po.servers = o.data_servers;
  po.metrics = metrics;
  v1::StreamBatchesRequest& r = po.request;
  r.set_dataset(o.dataset);
  r.set_seed(o.seed);
  r.set_global_batch_size(plan.global_batch);
  r.set_rank(rank);
  r.set_world_size(world);
  r.set_epoch(state.cursor.epoch);
  r.set_step_in_epoch(state.cursor.step_in_epoch);
  r.set_start_position(state.cursor.offset);
  r.set_max_batches(plan.steps_left * o.accumulation);
  r.set_remainder(v1::DROP);
  r.set_shuffle(true);
  r.set_normalize_to_f32(normalize_to_f32);
  return po;
}

}  // namespace worker
}  // namespace tandem
