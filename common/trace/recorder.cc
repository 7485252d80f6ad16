#include "common/trace/recorder.h"

#include <algorithm>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace trace {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

std::atomic<int> g_next_tid{0};
std::atomic<const char*> g_thread_names[kMaxNamedThreads];

}  // namespace

const char* Intern(absl::string_view s) {
  static absl::Mutex mu;
  static auto* strings ABSL_GUARDED_BY(mu) = new absl::node_hash_set<std::string>();
  absl::MutexLock lock(&mu);
  return strings->emplace(s).first->c_str();  // nodes never move
}

int ThisThreadId() {
  thread_local const int tid = g_next_tid.fetch_add(1, kRelaxed);
  return tid;
}

void SetThreadName(const char* name) {
  const int tid = ThisThreadId();
  if (tid < kMaxNamedThreads) g_thread_names[tid].store(name, std::memory_order_release);
}

const char* ThreadName(int tid) {
  if (tid < 0 || tid >= kMaxNamedThreads) return nullptr;
  return g_thread_names[tid].load(std::memory_order_acquire);
}

// Every field is a relaxed atomic so a concurrent Snapshot is race-free; on
// x86 and ARM these are plain loads and stores. `seq` is 2i+1 while event i
// is being written into the slot and 2i+2 once it is complete.
struct Recorder::Slot {
  std::atomic<uint64_t> seq{0};
  std::atomic<const char*> name{nullptr};
  std::atomic<const char*> category{nullptr};
  std::atomic<int64_t> ts_ns{0};
  std::atomic<int64_t> dur_ns{0};
  std::atomic<int64_t> step{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> index{0};
  std::atomic<int> tid{0};
  std::atomic<char> phase{'X'};
};

Recorder::Recorder(RecorderOptions options)
    : steps_(std::max(1, options.steps)),
      capacity_(steps_ * std::max(1, options.events_per_step)),
      slots_(new Slot[capacity_]),
      step_starts_(new std::atomic<int64_t>[steps_]) {
  for (int64_t i = 0; i < steps_; ++i) step_starts_[i].store(0, kRelaxed);
}

Recorder::~Recorder() = default;

size_t Recorder::allocated_bytes() const {
  return sizeof(*this) + static_cast<size_t>(capacity_) * sizeof(Slot) +
         static_cast<size_t>(steps_) * sizeof(std::atomic<int64_t>);
}

void Recorder::BeginStep(int64_t step) {
  const int64_t n = steps_begun_.load(kRelaxed);
  step_starts_[n % steps_].store(next_.load(kRelaxed), kRelaxed);
  current_step_.store(step, kRelaxed);
  steps_begun_.store(n + 1, std::memory_order_release);
}

void Recorder::Complete(const char* name, const char* category, int64_t ts_ns, int64_t dur_ns,
                        int64_t bytes, int64_t index) {
  Record('X', name, category, ts_ns, std::max<int64_t>(0, dur_ns), bytes, index);
}

void Recorder::Instant(const char* name, const char* category, int64_t ts_ns, int64_t index) {
  Record('i', name, category, ts_ns, 0, -1, index);
}

void Recorder::Record(char phase, const char* name, const char* category, int64_t ts_ns,
                      int64_t dur_ns, int64_t bytes, int64_t index) {
  const int64_t i = next_.fetch_add(1, kRelaxed);
  Slot& s = slots_[i % capacity_];
  s.seq.store(2 * static_cast<uint64_t>(i) + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.name.store(name, kRelaxed);
  s.category.store(category, kRelaxed);
  s.ts_ns.store(ts_ns, kRelaxed);
  s.dur_ns.store(dur_ns, kRelaxed);
  s.step.store(current_step_.load(kRelaxed), kRelaxed);
  s.bytes.store(bytes, kRelaxed);
  s.index.store(index, kRelaxed);
  s.tid.store(ThisThreadId(), kRelaxed);
  s.phase.store(phase, kRelaxed);
  s.seq.store(2 * static_cast<uint64_t>(i) + 2, std::memory_order_release);
}

std::vector<Event> Recorder::Snapshot() const {
  const int64_t end = next_.load(std::memory_order_acquire);
  int64_t begin = std::max<int64_t>(0, end - capacity_);
  // The oldest of the newest `steps_` steps, once that many have begun.
  const int64_t begun = steps_begun_.load(std::memory_order_acquire);
  if (begun >= steps_) begin = std::max(begin, step_starts_[begun % steps_].load(kRelaxed));
  std::vector<Event> out;
  out.reserve(static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) {
    const Slot& s = slots_[i % capacity_];
    const uint64_t want = 2 * static_cast<uint64_t>(i) + 2;
    if (s.seq.load(std::memory_order_acquire) != want) continue;  // in flight or overwritten
    Event e;
    e.name = s.name.load(kRelaxed);
    e.category = s.category.load(kRelaxed);
    e.ts_ns = s.ts_ns.load(kRelaxed);
    e.dur_ns = s.dur_ns.load(kRelaxed);
    e.step = s.step.load(kRelaxed);
    e.bytes = s.bytes.load(kRelaxed);
    e.index = s.index.load(kRelaxed);
    e.tid = s.tid.load(kRelaxed);
    e.phase = s.phase.load(kRelaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(kRelaxed) != want) continue;  // rewritten while read
    out.push_back(e);
  }
  return out;
}

}  // namespace trace
}  // namespace tandem
