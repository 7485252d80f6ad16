// StragglerDetector: names a rank that is persistently slower than the
// others while the job runs, with the component that makes it slow.
//
// Each worker's heartbeat carries its step times since the previous one
// (v1::StepTiming: compute, data wait, exposed communication, summed over
// the steps of the window). Per report, the rank's own step time is
//
//   own = compute + data + network,  network = max(0, comm - (A_max - A))
//
// per step, where A = compute + data + other (the agreement, evaluation and
// checkpoint writes between steps) is when the rank reached the step's
// collectives and A_max the latest arrival among the ranks' newest reports:
// in a synchronous step every rank waits for the last one, so the wait for
// slower peers is taken out of the exposed communication and what remains
// is the rank's own network time. A report is *slow* when own is at least
// `threshold` (default 25%) above the median of the other ranks' own times
// (with 2 ranks: the other rank's) and at least `min_excess` above it in
// absolute terms. `window` (default 5) slow reports in a row name the rank;
// its cause is the component (compute, data, network) whose excess over the
// other ranks' median explains most of the difference. A named rank clears
// after `window` reports in a row below `clear_threshold` (default half
// the threshold): the hysteresis keeps a rank that hovers near the line
// from flapping. With one rank nobody is ever named.
//
//   StragglerDetector d(options);
//   if (auto e = d.Report(rank, worker_id, timing)) LOG(WARNING) << e->line;
//   for (const v1::Straggler& s : d.Named()) ...
//
// Thread-safe (one mutex; Report never calls out). Reports without steps
// are ignored; a rank whose newest report is older than `stale_after` is
// left out of the others' median. Reset() forgets every rank (a new
// generation renumbers them).
#ifndef TANDEM_SERVICES_COORDINATOR_STRAGGLER_DETECTOR_H_
#define TANDEM_SERVICES_COORDINATOR_STRAGGLER_DETECTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace tandem {

struct StragglerOptions {
  // Slow: own step time >= (1 + threshold) x the other ranks' median.
  double threshold = 0.25;
  // Consecutive slow reports (heartbeats, ~1 s each) that name a rank, and
  // consecutive recovered reports that clear it.
  int window = 5;
  // Recovered: own step time < (1 + clear_threshold) x the median; < 0 =
  // threshold / 2.
  double clear_threshold = -1;
  // A slow report must also be this much slower per step (jitter on
  // millisecond steps is not a straggler).
  absl::Duration min_excess = absl::Milliseconds(1);
  // Other ranks' reports older than this are left out of the median.
  absl::Duration stale_after = absl::Seconds(10);
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// INVALID_ARGUMENT naming the flag to fix (--straggler_threshold,
// --straggler_window).
absl::Status ValidateStragglerOptions(const StragglerOptions& options);

// The console line for a named rank:
// "straggler: rank 2 (worker-2) is 41% slower than the median for 12 steps: compute".
std::string FormatStraggler(const v1::Straggler& s);

struct StragglerEvent {
  bool named = true;  // false: the rank recovered and was cleared
  v1::Straggler straggler;
  std::string line;   // for the console and the log
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerOptions options);
  StragglerDetector(const StragglerDetector&) = delete;
  StragglerDetector& operator=(const StragglerDetector&) = delete;

  // One heartbeat's timing of `rank`; returns the event when this report
  // names or clears it.
  std::optional<StragglerEvent> Report(int rank, const std::string& worker_id,
                                       const v1::StepTiming& timing);
  // The ranks named now, by rank.
  std::vector<v1::Straggler> Named() const;
  // Ranks that reported since the last Reset, ascending.
  std::vector<int> Ranks() const;
  void Reset();

 private:
  struct PerStep {  // seconds per step
    double compute = 0, data = 0, comm = 0, other = 0;
    double arrival() const { return compute + data + other; }
  };
  struct RankState {
    std::string worker_id;
    PerStep last;
    absl::Time reported_at;
    int slow_reports = 0;     // consecutive, while not named
    int64_t slow_steps = 0;   // steps of those reports
    int recovered_reports = 0;  // consecutive, while named
    bool named = false;
    v1::Straggler verdict;    // while named (updated each report)
  };
  struct Judgement {
    double own = 0, median = 0;  // per-step seconds
    std::string cause;
    double excess = 0;  // own / median - 1
    bool slow = false;  // over the threshold and min_excess
  };

  // `rank`'s own step time against the median of the other fresh ranks;
  // nullopt when no other rank is fresh.
  std::optional<Judgement> Judge(int rank, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The report's effect on a named rank (may clear it) and on one not
  // named (may name it).
  std::optional<StragglerEvent> WhileNamed(int rank, RankState& st, const Judgement& j,
                                           int64_t steps) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<StragglerEvent> WhileNotNamed(int rank, RankState& st, const Judgement& j,
                                              int64_t steps, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void SetNumbers(const Judgement& j, v1::Straggler* v);

  const StragglerOptions o_;
  const double clear_threshold_;
  mutable absl::Mutex mu_;
  std::map<int, RankState> ranks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_STRAGGLER_DETECTOR_H_
