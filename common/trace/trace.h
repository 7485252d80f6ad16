// The process-wide trace switch and the scoped span every instrumented site
// uses. main() installs a Recorder when --trace is on (ProcessTrace does);
// everything else only writes
//
//   trace::Span span("forward", "compute");          // a span until scope end
//   trace::Span span(bucket_name, "comm", bytes, b); // with bytes and an index
//   trace::MarkStep(step);                           // the trainer, per step
//   trace::MarkInstant("generation", "control", g);  // a moment
//
// With no recorder installed (the default) each costs one relaxed load and
// one predictable branch, and nothing else runs. Names and categories must
// outlive the process: literals or trace::Intern()ed strings.
//
// Thread-safety: all of it from any thread. Install / Uninstall are for
// main() and tests: the recorder must outlive every span open while it is
// installed.
#ifndef TANDEM_COMMON_TRACE_TRACE_H_
#define TANDEM_COMMON_TRACE_TRACE_H_

#include <atomic>
#include <cstdint>

#include "absl/base/optimization.h"
#include "common/trace/recorder.h"

namespace tandem {
namespace trace {

namespace internal {
extern std::atomic<Recorder*> g_active;
}  // namespace internal

inline Recorder* Active() { return internal::g_active.load(std::memory_order_relaxed); }
inline bool Enabled() { return ABSL_PREDICT_FALSE(Active() != nullptr); }

// Makes `r` the recorder spans go to (null: tracing off). Borrowed.
void Install(Recorder* r);

inline void MarkStep(int64_t step) {
  if (Recorder* r = Active(); ABSL_PREDICT_FALSE(r != nullptr)) r->BeginStep(step);
}

inline void MarkInstant(const char* name, const char* category, int64_t index = -1) {
  if (Recorder* r = Active(); ABSL_PREDICT_FALSE(r != nullptr)) {
    r->Instant(name, category, NowNanos(), index);
  }
}

// RAII: records [construction, destruction) as one complete event.
class Span {
 public:
  Span(const char* name, const char* category, int64_t bytes = -1, int64_t index = -1)
      : recorder_(Active()) {
    if (ABSL_PREDICT_FALSE(recorder_ != nullptr)) {
      name_ = name;
      category_ = category;
      bytes_ = bytes;
      index_ = index;
      start_ns_ = NowNanos();
    }
  }
  ~Span() {
    if (ABSL_PREDICT_FALSE(recorder_ != nullptr)) {
      recorder_->Complete(name_, category_, start_ns_, NowNanos() - start_ns_, bytes_, index_);
    }
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Recorder* const recorder_;
  const char* name_ = nullptr;
  const char* category_ = nullptr;
  int64_t bytes_ = -1;
  int64_t index_ = -1;
  int64_t start_ns_ = 0;
};

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_TRACE_H_
