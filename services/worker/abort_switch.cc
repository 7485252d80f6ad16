#include "services/worker/abort_switch.h"

namespace tandem {
namespace worker {

void AbortSwitch::Arm(int64_t generation, std::vector<Communicator*> comms) {
  absl::MutexLock lock(&mu_);
  armed_generation_ = generation;
  comms_.clear();
  for (Communicator* c : comms) {
    if (c != nullptr) comms_.push_back(c);
  }
  if (fired_generation_ == generation) AbortLocked();
}

void AbortSwitch::Disarm() {
  absl::MutexLock lock(&mu_);
  armed_generation_ = -1;
  comms_.clear();
}

void AbortSwitch::Fire(int64_t generation, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  fired_generation_ = generation;
  fired_reason_ = reason;
  if (armed_generation_ == generation) AbortLocked();
}

std::string AbortSwitch::reason(int64_t generation) const {
  absl::MutexLock lock(&mu_);
  return fired_generation_ == generation ? fired_reason_ : std::string();
}

void AbortSwitch::AbortLocked() {
  // Abort never blocks on a peer, so holding the lock is fine; it is what
  // keeps Disarm (and the destruction of the comms after it) from racing.
  for (Communicator* c : comms_) c->Abort(fired_reason_);
}

}  // namespace worker
}  // namespace tandem
