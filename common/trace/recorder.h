// Recorder: the bounded in-memory ring a traced process records its spans
// into (--trace). It holds the events of about the last `steps` training
// steps: the ring has steps × events_per_step slots, allocated once at
// construction, and BeginStep marks where each step began so a snapshot
// starts at the oldest of the newest `steps` steps (a step that recorded
// more than events_per_step events on average shortens what is kept, never
// grows the memory). Recording allocates nothing: names and categories are
// static strings or Intern()ed ones, and the arguments are two integers.
//
//   Recorder r(RecorderOptions{.steps = 200});
//   r.BeginStep(17);
//   r.Complete("forward", "compute", start_ns, end_ns - start_ns);
//   std::vector<Event> events = r.Snapshot();   // oldest first
//
// Thread-safety: Complete / Instant / BeginStep from any thread at once,
// lock-free (a slot is claimed with one atomic add; a per-slot sequence
// number lets Snapshot, from any thread, skip a slot being rewritten).
// Thread names are kept per process (SetThreadName). Fails never: a full
// ring overwrites its oldest events.
#ifndef TANDEM_COMMON_TRACE_RECORDER_H_
#define TANDEM_COMMON_TRACE_RECORDER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/trace/clock.h"

namespace tandem {
namespace trace {

// A copy of `s` that lives as long as the process (one copy per distinct
// string): for names built at run time (a strategy's operation name).
// Thread-safe; allocates, so call it at construction, not per span.
const char* Intern(absl::string_view s);

// This thread's small trace id (0, 1, 2, ... in order of first use).
int ThisThreadId();
// Names this thread's track ("comm", "trainer"); `name` must outlive the
// process (a literal or Intern()ed). Thread ids past kMaxNamedThreads stay
// unnamed.
constexpr int kMaxNamedThreads = 1024;
void SetThreadName(const char* name);
const char* ThreadName(int tid);  // null when unnamed

struct Event {
  const char* name = nullptr;
  const char* category = nullptr;
  int64_t ts_ns = 0;   // start (NowNanos)
  int64_t dur_ns = 0;  // 'X' only, >= 0
  int64_t step = 0;    // the step BeginStep last marked
  int64_t bytes = -1;  // -1: none
  int64_t index = -1;  // bucket / chunk / generation; -1: none
  int tid = 0;
  char phase = 'X';  // 'X' complete, 'i' instant
};

struct RecorderOptions {
  int steps = 200;            // steps kept, > 0 (--trace_steps)
  int events_per_step = 128;  // slots per step, > 0
};

class Recorder {
 public:
  explicit Recorder(RecorderOptions options);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // A training step begins (the trainer thread, once per step).
  void BeginStep(int64_t step);
  // A span of `dur_ns` that started at `ts_ns`.
  void Complete(const char* name, const char* category, int64_t ts_ns, int64_t dur_ns,
                int64_t bytes = -1, int64_t index = -1);
  // A moment (a generation change).
  void Instant(const char* name, const char* category, int64_t ts_ns, int64_t index = -1);

  // The events of the newest `steps` steps (and any recorded before the
  // first BeginStep while they are still in the ring), oldest first.
  std::vector<Event> Snapshot() const;

  int64_t capacity() const { return capacity_; }
  int64_t recorded() const { return next_.load(std::memory_order_relaxed); }
  // Bytes this recorder allocated (all of it at construction).
  size_t allocated_bytes() const;

 private:
  struct Slot;
  void Record(char phase, const char* name, const char* category, int64_t ts_ns, int64_t dur_ns,
              int64_t bytes, int64_t index);

  const int64_t steps_;
  const int64_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<std::atomic<int64_t>[]> step_starts_;  // ring of `steps_` event indices
  std::atomic<int64_t> next_{0};                         // next event index
  std::atomic<int64_t> steps_begun_{0};
  std::atomic<int64_t> current_step_{0};
};

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_RECORDER_H_
