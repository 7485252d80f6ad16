// Test-only: a strict reader of Chrome Trace Event JSON, to check what
// --trace writes. ParseTrace parses the whole document (any JSON syntax
// error fails it) and checks the Trace Event rules tandem promises: a
// top-level object with a "traceEvents" array; every event an object with
// ph, ts, pid and tid; "X" events with dur >= 0. CheckNesting checks that
// the complete events of each (pid, tid) nest like a call stack.
//
//   ASSIGN_OR_RETURN(std::vector<TraceEvent> events, ParseTrace(text));
//   EXPECT_TRUE(CheckNesting(events).ok());
//
// Thread-compatible. Failures are InvalidArgument naming what is wrong.
#ifndef TANDEM_COMMON_TRACE_TESTING_TRACE_JSON_H_
#define TANDEM_COMMON_TRACE_TESTING_TRACE_JSON_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace trace {
namespace testing {

struct TraceEvent {
  std::string ph;
  std::string name;
  std::string cat;
  int64_t pid = 0;
  int64_t tid = 0;
  double ts = 0;   // microseconds
  double dur = 0;  // "X" only
  std::map<std::string, double> num_args;       // numeric args
  std::map<std::string, std::string> str_args;  // string args (metadata names)
};

absl::StatusOr<std::vector<TraceEvent>> ParseTrace(absl::string_view json);

absl::Status CheckNesting(const std::vector<TraceEvent>& events);

}  // namespace testing
}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_TESTING_TRACE_JSON_H_
