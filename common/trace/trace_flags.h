// The --trace flags every traced tandem process takes (worker, shard
// server, data server), in the style of common/rpc/tls_flags.h: a service's
// main.cc expands TANDEM_TRACE_FLAGS() once at file scope, which defines
// --trace, --trace_steps and --trace_file and tandem::TraceOptionsFromFlags
// in that file; then
//
//   TANDEM_TRACE_FLAGS();   // file scope, main.cc only
//   ...
//   trace::ProcessTraceOptions t = tandem::TraceOptionsFromFlags("worker");
//   t.reference_clock = trace::CoordinatorClock(coordinator);   // if known
//   auto tracer = trace::ProcessTrace::Start(std::move(t));     // null when off
//
// The default --trace_file is trace-<role>-<pid>.json in the working
// directory. Not thread-safe (main() only).
#ifndef TANDEM_COMMON_TRACE_TRACE_FLAGS_H_
#define TANDEM_COMMON_TRACE_TRACE_FLAGS_H_

#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/trace/process_trace.h"

#define TANDEM_TRACE_FLAGS()                                                                   \
  ABSL_FLAG(bool, trace, false,                                                                \
            "record a timeline of this process (spans of the last --trace_steps steps) and "   \
            "write it as Chrome trace JSON at exit and on SIGUSR1 (open in Perfetto)");        \
  ABSL_FLAG(int, trace_steps, 200, "with --trace: the steps the in-memory ring keeps, >= 1");  \
  ABSL_FLAG(std::string, trace_file, "",                                                       \
            "with --trace: the file written (default trace-<role>-<pid>.json in the working "  \
            "directory)");                                                                     \
  namespace tandem {                                                                           \
  trace::ProcessTraceOptions TraceOptionsFromFlags(const std::string& role) {                  \
    trace::ProcessTraceOptions o;                                                              \
    o.enabled = absl::GetFlag(FLAGS_trace);                                                    \
    o.steps = absl::GetFlag(FLAGS_trace_steps);                                                \
    o.path = absl::GetFlag(FLAGS_trace_file);                                                  \
    if (o.path.empty()) o.path = absl::StrCat("trace-", role, "-", getpid(), ".json");         \
    o.track.process_name = role;                                                               \
    return o;                                                                                  \
  }                                                                                            \
  }                                                                                            \
  static_assert(true, "")

#endif  // TANDEM_COMMON_TRACE_TRACE_FLAGS_H_
