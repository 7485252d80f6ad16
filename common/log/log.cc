#include "common/log/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tandem {
namespace log_internal {
namespace {

std::atomic<int> g_min_severity{static_cast<int>(Severity::kInfo)};

const char* Letter(Severity s) {
  switch (s) {
    case Severity::kInfo: return "I";
    case Severity::kWarning: return "W";
    case Severity::kError: return "E";
    case Severity::kFatal: return "F";
  }
  return "?";
}

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

void SetMinSeverity(Severity s) { g_min_severity.store(static_cast<int>(s)); }

Severity MinSeverity() { return static_cast<Severity>(g_min_severity.load()); }

LogMessage::LogMessage(Severity severity, const char* file, int line)
    : severity_(severity) {
  stream_ << Letter(severity)
          << absl::FormatTime("%m%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone())
          << ' ' << getpid() << ' ' << Basename(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  // One write per line so concurrent lines never interleave.
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  if (severity_ == Severity::kFatal) std::abort();
}

}  // namespace log_internal
}  // namespace tandem
