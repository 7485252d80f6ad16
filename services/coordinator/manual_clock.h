// Test-only: a clock tests move by hand, for CoordinatorOptions::clock
// (liveness, stall detection).
//
//   ManualClock clock;
//   o.clock = [&clock] { return clock.Now(); };
//   clock.Advance(absl::Seconds(4));
//
// Thread-safe.
#ifndef TANDEM_SERVICES_COORDINATOR_MANUAL_CLOCK_H_
#define TANDEM_SERVICES_COORDINATOR_MANUAL_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

class ManualClock {
 public:
  absl::Time Now() {
    absl::MutexLock l(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1000000);
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_MANUAL_CLOCK_H_
