// The --trace flags every traced tandem process takes (worker, shard
// server, data server), in the style of common/rpc/tls_flags.h: a service's
// main.cc expands TANDEM_TRACE_FLAGS() once at file scope, which defines
// --trace, --trace_steps and --trace_file and tandem::TraceOptionsFromFlags
// in that file; then
//
//   TANDEM_TRACE_FLAGS();   // file scope, main.cc only
//   ...
//   // null when --trace is off; aligned to the coordinator when one is named
//   auto tracer = tandem::StartTraceFromFlags("worker", coordinator_address);
//   if (!tracer.ok()) { print tracer.status(); return 2; }
//
// The default --trace_file is trace-<role>-<host>-<pid>.json in the working
// directory; a --trace_file ending in '/' puts that name in that directory
// (a volume several containers share). Not thread-safe (main() only).
#ifndef TANDEM_COMMON_TRACE_TRACE_FLAGS_H_
#define TANDEM_COMMON_TRACE_TRACE_FLAGS_H_

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/trace/coordinator_clock.h"
#include "common/trace/process_trace.h"

#define TANDEM_TRACE_FLAGS()                                                                   \
  ABSL_FLAG(bool, trace, false,                                                                \
            "record a timeline of this process (spans of the last --trace_steps steps) and "   \
            "write it as Chrome trace JSON at exit and on SIGUSR1 (open in Perfetto)");        \
  ABSL_FLAG(int, trace_steps, 200, "with --trace: the steps the in-memory ring keeps, >= 1");  \
  ABSL_FLAG(std::string, trace_file, "",                                                       \
            "with --trace: the file written (default trace-<role>-<host>-<pid>.json in the "   \
            "working directory; ending in / : that name in that directory)");                  \
  namespace tandem {                                                                           \
  trace::ProcessTraceOptions TraceOptionsFromFlags(const std::string& role) {                  \
    trace::ProcessTraceOptions o;                                                              \
    o.enabled = absl::GetFlag(FLAGS_trace);                                                    \
    o.steps = absl::GetFlag(FLAGS_trace_steps);                                                \
    o.path = absl::GetFlag(FLAGS_trace_file);                                                  \
    if (o.path.empty() || o.path.back() == '/') o.path += trace::DefaultTraceFileName(role);   \
    o.track.process_name = role;                                                               \
    return o;                                                                                  \
  }                                                                                            \
  absl::StatusOr<std::unique_ptr<trace::ProcessTrace>> StartTraceFromFlags(                    \
      const std::string& role, const std::string& coordinator) {                               \
    trace::ProcessTraceOptions o = TraceOptionsFromFlags(role);                                \
    if (o.enabled && !coordinator.empty()) o.reference_clock = trace::CoordinatorClock(coordinator); \
    return trace::ProcessTrace::Start(std::move(o));                                           \
  }                                                                                            \
  }                                                                                            \
  static_assert(true, "")

#endif  // TANDEM_COMMON_TRACE_TRACE_FLAGS_H_
