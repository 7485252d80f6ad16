// Chrome Trace Event JSON for one process's events: what Perfetto and
// chrome://tracing open, and what `tandem trace` merges.
//
//   TraceFileInfo info;  info.pid = 0;  info.process_name = "worker rank 0";
//   info.offset_ns = estimate.offset_ns;  // onto the coordinator's clock
//   std::string json = ChromeTraceJson(recorder.Snapshot(), info);
//
// Layout: {"otherData":{...},"traceEvents":[ ... ]} with one event per line:
// "M" metadata naming the process and each thread that recorded, then "X"
// complete events (ts and dur in microseconds, args step / bytes / index)
// and "i" instants. ts = (event ns + offset_ns) / 1000. The line layout is
// part of the contract: MergeChromeTraces concatenates the traceEvents of
// several files without parsing them.
//
// Pure functions; thread-safe.
#ifndef TANDEM_COMMON_TRACE_CHROME_JSON_H_
#define TANDEM_COMMON_TRACE_CHROME_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trace/recorder.h"

namespace tandem {
namespace trace {

struct TraceFileInfo {
  int64_t pid = 0;           // the track: a worker's rank, a service's own number
  std::string process_name;  // "worker rank 0", "data server"
  int64_t sort_index = 0;    // the track's place in the viewer
  int64_t offset_ns = 0;     // added to every timestamp (clock alignment)
  int64_t clock_rtt_ns = -1; // the round trip the offset came from; -1: none
};

std::string ChromeTraceJson(const std::vector<Event>& events, const TraceFileInfo& info);

// One JSON document holding every event of `files` (each the text of a
// ChromeTraceJson file). InvalidArgument naming the file index when one is
// not in that layout (truncated, or not a tandem trace).
absl::StatusOr<std::string> MergeChromeTraces(const std::vector<std::string>& files);

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_CHROME_JSON_H_
