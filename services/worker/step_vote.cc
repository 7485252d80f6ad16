#include "services/worker/step_vote.h"

#include <cmath>

#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
namespace {

// The wire layout of the vote: one float per field, summed.
enum Slot { kStop, kRejoin, kCoordinatorLost, kLoss, kWantedBatch, kGradSumSq, kSlots };

}  // namespace

absl::StatusOr<StepVote> AgreeOnStep(Communicator& ctl, const StepVote& mine) {
  float v[kSlots];
  v[kStop] = mine.stop ? 1.f : 0.f;
  v[kRejoin] = mine.rejoin ? 1.f : 0.f;
  v[kCoordinatorLost] = mine.coordinator_lost ? 1.f : 0.f;
  v[kLoss] = mine.loss;
  v[kWantedBatch] = static_cast<float>(mine.wanted_global_batch);
  v[kGradSumSq] = mine.local_grad_sum_sq;
  RETURN_IF_ERROR(ctl.AllReduce(v, kSlots, ReduceOp::kSum));
  StepVote all;
  all.stop = v[kStop] > 0;
  all.rejoin = v[kRejoin] > 0;
  all.coordinator_lost = v[kCoordinatorLost] > 0;
  all.loss = v[kLoss];
  all.wanted_global_batch = static_cast<int64_t>(std::llround(v[kWantedBatch]));
  all.local_grad_sum_sq = v[kGradSumSq];
  return all;
}

}  // namespace worker
}  // namespace tandem
