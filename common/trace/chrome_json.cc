#include "common/trace/chrome_json.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace trace {
namespace {

constexpr char kEventsKey[] = "\"traceEvents\":[\n";
constexpr char kEnd[] = "\n]}\n";

std::string Quoted(const char* s) {
  std::string out = "\"";
  for (const char* p = s != nullptr ? s : "?"; *p != '\0'; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Microseconds with nanosecond digits, exactly (a double would round
// nanoseconds away at today's uptimes).
std::string Micros(int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const uint64_t a = ns < 0 ? -static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return absl::StrFormat("%s%d.%03d", sign, a / 1000, a % 1000);
}

std::string Metadata(const char* what, int64_t pid, int tid, const std::string& args) {
  return absl::StrCat("{\"ph\":\"M\",\"name\":\"", what, "\",\"pid\":", pid, ",\"tid\":", tid, ",\"ts\":0",
                      ",\"args\":{", args, "}}");
}

std::string EventLine(const Event& e, const TraceFileInfo& info) {
  std::string line = absl::StrCat("{\"ph\":\"", std::string(1, e.phase), "\",\"name\":",
                                  Quoted(e.name), ",\"cat\":", Quoted(e.category),
                                  ",\"pid\":", info.pid, ",\"tid\":", e.tid,
                                  ",\"ts\":", Micros(e.ts_ns + info.offset_ns));
  if (e.phase == 'X') absl::StrAppend(&line, ",\"dur\":", Micros(e.dur_ns));
  if (e.phase == 'i') absl::StrAppend(&line, ",\"s\":\"t\"");
  absl::StrAppend(&line, ",\"args\":{\"step\":", e.step);
  if (e.bytes >= 0) absl::StrAppend(&line, ",\"bytes\":", e.bytes);
  if (e.index >= 0) absl::StrAppend(&line, ",\"index\":", e.index);
  return line + "}}";
}

}  // namespace

std::string ChromeTraceJson(const std::vector<Event>& events, const TraceFileInfo& info) {
  std::string out = absl::StrCat(
      "{\"otherData\":{\"tandem_trace\":1,\"process\":", Quoted(info.process_name.c_str()),
      ",\"pid\":", info.pid, ",\"clock_offset_us\":", Micros(info.offset_ns),
      ",\"clock_rtt_us\":", info.clock_rtt_ns >= 0 ? Micros(info.clock_rtt_ns) : "null",
      ",\"events\":", events.size(), "},", kEventsKey);
  std::vector<std::string> lines;
  lines.push_back(Metadata("process_name", info.pid, 0,
                           absl::StrCat("\"name\":", Quoted(info.process_name.c_str()))));
  lines.push_back(Metadata("process_sort_index", info.pid, 0,
                           absl::StrCat("\"sort_index\":", info.sort_index)));
  std::set<int> tids;
  for (const Event& e : events) tids.insert(e.tid);
  for (int tid : tids) {
    const char* name = ThreadName(tid);
    lines.push_back(Metadata(
        "thread_name", info.pid, tid,
        absl::StrCat("\"name\":", name != nullptr ? Quoted(name)
                                                  : absl::StrCat("\"thread ", tid, "\""))));
    lines.push_back(
        Metadata("thread_sort_index", info.pid, tid, absl::StrCat("\"sort_index\":", tid)));
  }
  for (const Event& e : events) lines.push_back(EventLine(e, info));
  absl::StrAppend(&out, absl::StrJoin(lines, ",\n"), kEnd);
  return out;
}

absl::StatusOr<std::string> MergeChromeTraces(const std::vector<std::string>& files) {
  std::string out = "{\"otherData\":{\"tandem_trace\":1,\"merged\":" +
                    std::to_string(files.size()) + "}," + kEventsKey;
  bool first = true;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& f = files[i];
    const size_t begin = f.find(kEventsKey);
    const size_t end = f.rfind(kEnd);
    if (begin == std::string::npos || end == std::string::npos ||
        end < begin + sizeof(kEventsKey) - 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace file ", i + 1, " of ", files.size(),
          " is not a complete tandem trace (truncated, or written by something else)"));
    }
    const size_t from = begin + sizeof(kEventsKey) - 1;
    if (end == from) continue;  // no events
    if (!first) out += ",\n";
    out.append(f, from, end - from);
    first = false;
  }
  return out + kEnd;
}

}  // namespace trace
}  // namespace tandem
