// ProcessTrace: --trace for one process. It owns the Recorder, installs it
// (trace.h), and writes the Chrome trace file (chrome_json.h) at exit (its
// destructor), on SIGUSR1 (the handler only sets a flag; this object's
// thread writes) and on Write(). Its thread also estimates the offset to a
// reference clock (the coordinator's Clock RPC) at start and every
// `clock_every`, never per step, and shifts the timestamps it writes by it.
//
//   ProcessTraceOptions o;  o.enabled = true;  o.path = "trace/worker-0.json";
//   o.track.process_name = "worker";  o.reference_clock = CoordinatorClock(addr);
//   ASSIGN_OR_RETURN(std::unique_ptr<ProcessTrace> t, ProcessTrace::Start(std::move(o)));
//   ...                          // spans recorded; `kill -USR1 pid` writes the file
//   t.reset();                   // writes the file once more, uninstalls
//
// With enabled == false Start returns null and nothing is installed.
// Thread-safe. One ProcessTrace per process at a time (FailedPrecondition
// for a second). A write that fails is logged and retried at the next
// trigger; the destructor's failure is logged.
#ifndef TANDEM_COMMON_TRACE_PROCESS_TRACE_H_
#define TANDEM_COMMON_TRACE_PROCESS_TRACE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/trace/chrome_json.h"
#include "common/trace/recorder.h"

namespace tandem {
namespace trace {

struct ProcessTraceOptions {
  bool enabled = false;        // --trace
  int steps = 200;             // --trace_steps: steps kept, > 0
  int events_per_step = 128;   // ring slots per step
  std::string path;            // the file written; required when enabled
  TraceFileInfo track;         // pid (-1: the OS pid), name, sort index
  // The reference clock in ns (the coordinator's NowNanos); null: offset 0,
  // right when every process shares this host's monotonic clock.
  std::function<absl::StatusOr<int64_t>()> reference_clock;
  int clock_samples = 8;
  absl::Duration clock_every = absl::Seconds(60);
  absl::Duration poll = absl::Milliseconds(100);  // how soon SIGUSR1 is served
};

class ProcessTrace {
 public:
  // InvalidArgument for steps < 1 or an empty path.
  static absl::StatusOr<std::unique_ptr<ProcessTrace>> Start(ProcessTraceOptions options);
  ~ProcessTrace();
  ProcessTrace(const ProcessTrace&) = delete;
  ProcessTrace& operator=(const ProcessTrace&) = delete;

  // Writes the file now (atomically: a temporary name, then rename).
  absl::Status Write();
  // The track this process is shown as (a worker's rank changes per
  // generation).
  void SetTrack(int64_t pid, const std::string& name, int64_t sort_index);
  // Files written so far.
  int64_t writes() const;
  const Recorder& recorder() const { return *recorder_; }

 private:
  explicit ProcessTrace(ProcessTraceOptions options);
  void Loop();
  void MeasureClock(int samples) ABSL_LOCKS_EXCLUDED(mu_);

  const ProcessTraceOptions o_;
  std::unique_ptr<Recorder> recorder_;
  mutable absl::Mutex mu_;
  TraceFileInfo track_ ABSL_GUARDED_BY(mu_);
  bool clock_known_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_clock_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex write_mu_;  // one Write at a time
  std::thread thread_;
};

// "trace-<role>-<host>-<pid>.json": unique per process across containers
// that share a volume (each has pid 1 and its own host name).
std::string DefaultTraceFileName(const std::string& role);

// A track id for a service (data server, shard server) that no worker rank
// and, in practice, no other service uses: 1000000 + a hash of host and pid.
int64_t ServiceTrackId();

// Sets the track of the ProcessTrace running in this process, if any (the
// trainer, when a generation gives this worker its rank).
void SetProcessTrack(int64_t pid, const std::string& name, int64_t sort_index);

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_PROCESS_TRACE_H_
