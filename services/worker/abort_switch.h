// AbortSwitch: lets the heartbeat thread abort the collectives of the
// generation the trainer is in, the moment the coordinator says that
// generation failed (a rank lost, a collective failed), instead of leaving
// the survivors waiting out the collective timeout for a hung peer.
//
//   AbortSwitch sw;
//   client->SetFailureHandler([&](int64_t gen, const std::string& why) { sw.Fire(gen, why); });
//   sw.Arm(gen, {g.ctl.get(), g.grad.world.get()});   // trainer, after set-up
//   ... train: a Fire(gen, ...) now fails the collective in flight with ABORTED ...
//   sw.Disarm();                                       // before the comms are destroyed
//
// A Fire for a generation that is not armed yet is remembered, and Arm of
// that generation aborts at once (the failure raced with the set-up).
// Thread-safe. Borrows the communicators between Arm and Disarm: Disarm
// returns only once no Fire is using them, so they may be destroyed after.
#ifndef TANDEM_SERVICES_WORKER_ABORT_SWITCH_H_
#define TANDEM_SERVICES_WORKER_ABORT_SWITCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/comm/communicator.h"

namespace tandem {
namespace worker {

class AbortSwitch {
 public:
  // Null entries are skipped.
  void Arm(int64_t generation, std::vector<Communicator*> comms);
  void Disarm();
  // Aborts the armed communicators if they belong to `generation`.
  void Fire(int64_t generation, const std::string& reason);

  // The reason of the last Fire for `generation` ("" if none).
  std::string reason(int64_t generation) const;

 private:
  void AbortLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int64_t armed_generation_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<Communicator*> comms_ ABSL_GUARDED_BY(mu_);
  int64_t fired_generation_ ABSL_GUARDED_BY(mu_) = -1;
  std::string fired_reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_ABORT_SWITCH_H_
