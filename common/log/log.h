// Minimal leveled logging to stderr for tandem processes.
//
//   LOG(INFO) << "listening on port " << port;
//   LOG(ERROR) << status;
//   CHECK(buffer != nullptr) << "only for states that cannot be recovered";
//   DCHECK_LE(lo, hi);  // compiled out with NDEBUG
//
// Thread-safe: each statement is formatted into its own buffer and written
// with a single write(2). LOG(FATAL) and failed CHECKs abort; use them only
// for broken invariants, never for anything a user, file or network can cause
// (those are absl::Status). Abseil 20220623 has no absl/log, hence this file.
#ifndef TANDEM_COMMON_LOG_LOG_H_
#define TANDEM_COMMON_LOG_LOG_H_

#include <sstream>

namespace tandem {
namespace log_internal {

enum class Severity { kInfo = 0, kWarning = 1, kError = 2, kFatal = 3 };

// Messages below this severity are dropped (default kInfo). Set once at
// start-up (e.g. from a --log_level flag in main.cc).
void SetMinSeverity(Severity s);
Severity MinSeverity();

class LogMessage {
 public:
  LogMessage(Severity severity, const char* file, int line);
  ~LogMessage();  // writes the line; aborts for kFatal
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  Severity severity_;
  std::ostringstream stream_;
};

// Swallows a stream expression so a disabled LOG costs only the branch.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace log_internal
}  // namespace tandem

#define TANDEM_LOG_SEVERITY_INFO ::tandem::log_internal::Severity::kInfo
#define TANDEM_LOG_SEVERITY_WARNING ::tandem::log_internal::Severity::kWarning
#define TANDEM_LOG_SEVERITY_ERROR ::tandem::log_internal::Severity::kError
#define TANDEM_LOG_SEVERITY_FATAL ::tandem::log_internal::Severity::kFatal

#define LOG(severity)                                                        \
  (TANDEM_LOG_SEVERITY_##severity < ::tandem::log_internal::MinSeverity())  \
      ? (void)0                                                              \
      : ::tandem::log_internal::Voidify() &                                  \
            ::tandem::log_internal::LogMessage(TANDEM_LOG_SEVERITY_##severity, \
                                               __FILE__, __LINE__)           \
                .stream()

#define CHECK(cond)                                                        \
  (cond) ? (void)0                                                         \
         : ::tandem::log_internal::Voidify() &                             \
               ::tandem::log_internal::LogMessage(                         \
                   ::tandem::log_internal::Severity::kFatal, __FILE__, __LINE__) \
                       .stream()                                           \
                   << "Check failed: " #cond " "

#define CHECK_EQ(a, b) CHECK((a) == (b))
#define CHECK_NE(a, b) CHECK((a) != (b))
#define CHECK_LE(a, b) CHECK((a) <= (b))
#define CHECK_LT(a, b) CHECK((a) < (b))
#define CHECK_GE(a, b) CHECK((a) >= (b))
#define CHECK_GT(a, b) CHECK((a) > (b))

#ifdef NDEBUG
#define DCHECK(cond) \
  while (false) CHECK(cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
#define DCHECK_EQ(a, b) DCHECK((a) == (b))
#define DCHECK_LE(a, b) DCHECK((a) <= (b))
#define DCHECK_LT(a, b) DCHECK((a) < (b))
#define DCHECK_GE(a, b) DCHECK((a) >= (b))

#endif  // TANDEM_COMMON_LOG_LOG_H_
