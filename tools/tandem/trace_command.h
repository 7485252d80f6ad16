// `tandem trace --run_dir DIR` and what `tandem local --trace` does at the
// end of a run: collect every traced process's Chrome trace file and merge
// them into DIR/trace.json (one track per rank and per service, timestamps
// already on the coordinator's clock; open it in Perfetto or
// chrome://tracing).
//
// How it gets the files: tandem local starts each traced child with
// --trace_file=DIR/trace/NAME.json and leaves DIR/trace/NAME.traced beside
// it. CollectRunTrace signals every such process that is still running
// (pid from DIR/NAME.pid, checked against /proc/PID/cmdline so a reused pid
// is never signalled) with SIGUSR1, waits up to `timeout` for each to
// rewrite its file, then merges whatever files exist: a worker that has
// exited wrote its file at exit. A --max_workers slot that `tandem
// add-worker` never started (no DIR/NAME.pid) is skipped; one that ran and
// left no file is named in `missing`.
//
//   ASSIGN_OR_RETURN(TraceCollection c, CollectRunTrace(dir, absl::Seconds(10)));
//   print(FormatTraceCollection(c));
//
// Not thread-safe (the filesystem and signals; one call at a time).
// Failure: FailedPrecondition when DIR holds no trace (the run was not
// started with --trace) or no process has written a file yet; a merge or
// write error names the file.
#ifndef TANDEM_TOOLS_TANDEM_TRACE_COMMAND_H_
#define TANDEM_TOOLS_TANDEM_TRACE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {
namespace cli {

// The flags tandem local gives child `name` with --trace (and the marker
// that makes CollectRunTrace look for it).
std::vector<std::string> TraceChildArgs(const std::string& run_dir, const std::string& name,
                                        int trace_steps);

struct TraceCollection {
  std::string path;                  // DIR/trace.json
  int files = 0;                     // processes merged
  int signalled = 0;                 // live processes asked to write
  std::vector<std::string> missing;  // traced processes with no file, or stale: why
};

absl::StatusOr<TraceCollection> CollectRunTrace(const std::string& run_dir,
                                                absl::Duration timeout);

// Merges every trace file (*.json but trace.json) in `dir` into
// dir/trace.json: the files of processes started by hand, compose or Helm
// with --trace_file=DIR/ (each already on the coordinator's clock).
// FailedPrecondition when there is none.
absl::StatusOr<TraceCollection> MergeTraceDir(const std::string& dir);

// "trace: DIR/trace.json (4 processes; open it in https://ui.perfetto.dev)".
std::string FormatTraceCollection(const TraceCollection& c);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_TRACE_COMMAND_H_
