// StepVote: what every rank agrees on after an optimizer step, in one small
// collective on the control mesh (six floats summed): the coordinator's
// command as any rank heard it (so every rank acts at the same step), the
// loss and pre-sync gradient norm summed over ranks, and rank 0's wanted
// global batch (dynamic batch sizing; the other ranks vote 0).
//
//   StepVote mine;
//   mine.stop = c.kind == Command::kStop;  mine.loss = out.mean_loss;  ...
//   ASSIGN_OR_RETURN(StepVote all, AgreeOnStep(*g.ctl, mine));
//   if (all.stop) ...;  const float mean_loss = all.loss / world;
//
// The sums travel as fp32 (as they always have: the loss curve and the
// batch decisions are bit-identical to earlier releases). Thread-compatible;
// AgreeOnStep is a collective: every rank calls it once per step. Fails
// with the communicator's error.
#ifndef TANDEM_SERVICES_WORKER_STEP_VOTE_H_
#define TANDEM_SERVICES_WORKER_STEP_VOTE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"

namespace tandem {
namespace worker {

struct StepVote {
  bool stop = false;              // the coordinator asked to stop (checkpoint, leave)
  bool rejoin = false;            // the generation ended: re-join
  bool coordinator_lost = false;  // the coordinator is unreachable
  float loss = 0;                 // mine: this rank's mean loss; agreed: the sum
  int64_t wanted_global_batch = 0;  // rank 0's wanted batch (0 = keep the current one)
  float local_grad_sum_sq = 0;    // pre-sync |g|^2 (>= 0); agreed: the sum over ranks
};

// Sums `mine` over the ranks of `ctl`; a flag is set when any rank set it.
absl::StatusOr<StepVote> AgreeOnStep(Communicator& ctl, const StepVote& mine);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_STEP_VOTE_H_
