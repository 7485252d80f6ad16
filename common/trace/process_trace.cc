#include "common/trace/process_trace.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/log/log.h"
#include "common/trace/clock_offset.h"
#include "common/trace/trace.h"

namespace tandem {
namespace trace {
namespace {

// Set by the SIGUSR1 handler (async-signal-safe: a lock-free store), served
// by the running ProcessTrace's thread.
std::atomic<bool> g_write_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnSigusr1(int) { g_write_requested.store(true, std::memory_order_relaxed); }

absl::Mutex g_running_mu;
ProcessTrace* g_running ABSL_GUARDED_BY(g_running_mu) = nullptr;

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessTrace>> ProcessTrace::Start(ProcessTraceOptions options) {
  if (!options.enabled) return std::unique_ptr<ProcessTrace>();
  if (options.steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trace_steps must be at least 1 (got ", options.steps, ")"));
  }
  if (options.path.empty()) {
    return absl::InvalidArgumentError("--trace needs a file to write (--trace_file)");
  }
  if (options.track.pid < 0) options.track.pid = getpid();
  absl::MutexLock lock(&g_running_mu);
  if (g_running != nullptr) {
    return absl::FailedPreconditionError("a trace is already being recorded in this process");
  }
  std::unique_ptr<ProcessTrace> t(new ProcessTrace(std::move(options)));
  g_running = t.get();
  return t;
}

ProcessTrace::ProcessTrace(ProcessTraceOptions options)
    : o_(std::move(options)),
      recorder_(std::make_unique<Recorder>(RecorderOptions{o_.steps, o_.events_per_step})) {
  track_ = o_.track;
  struct sigaction sa = {};
  sa.sa_handler = OnSigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  SetThreadName("main");
  Install(recorder_.get());
  thread_ = std::thread([this] { Loop(); });
}

ProcessTrace::~ProcessTrace() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  Install(nullptr);
  {
    absl::MutexLock lock(&g_running_mu);
    g_running = nullptr;
  }
  bool known;
  {
    absl::MutexLock lock(&mu_);
    known = clock_known_;
  }
  // One more, short try (the coordinator may have come up late, or be gone:
  // at most two 1 s deadlines at exit).
  if (!known) MeasureClock(2);
  if (absl::Status s = Write(); !s.ok()) LOG(ERROR) << "--trace: " << s.message();
}

void ProcessTrace::Loop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), o_.poll);
      if (stop_) return;
    }
    bool clock_due;
    {
      absl::MutexLock lock(&mu_);
      clock_due = o_.reference_clock != nullptr && absl::Now() >= next_clock_;
    }
    if (clock_due) MeasureClock(o_.clock_samples);
    if (g_write_requested.exchange(false, std::memory_order_relaxed)) {
      if (absl::Status s = Write(); !s.ok()) LOG(ERROR) << "--trace: " << s.message();
    }
  }
}

void ProcessTrace::MeasureClock(int samples) {
  if (o_.reference_clock == nullptr) return;
  absl::StatusOr<ClockEstimate> e = MeasureClockOffset(o_.reference_clock, samples);
  absl::MutexLock lock(&mu_);
  if (!e.ok()) {
    // Not up yet, or gone: try again soon; the last estimate stays.
    next_clock_ = absl::Now() + absl::Seconds(2);
    return;
  }
  track_.offset_ns = e->offset_ns;
  track_.clock_rtt_ns = e->rtt_ns;
  clock_known_ = true;
  next_clock_ = absl::Now() + o_.clock_every;
}

absl::Status ProcessTrace::Write() {
  absl::MutexLock write_lock(&write_mu_);
  TraceFileInfo info;
  {
    absl::MutexLock lock(&mu_);
    info = track_;
  }
  const std::string json = ChromeTraceJson(recorder_->Snapshot(), info);
  if (absl::Status s = WriteFileAtomically(o_.path, json); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("writing the trace to ", o_.path, ": ",
                                               s.message()));
  }
  absl::MutexLock lock(&mu_);
  ++writes_;
  return absl::OkStatus();
}

void ProcessTrace::SetTrack(int64_t pid, const std::string& name, int64_t sort_index) {
  absl::MutexLock lock(&mu_);
  track_.pid = pid;
  track_.process_name = name;
  track_.sort_index = sort_index;
}

int64_t ProcessTrace::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

namespace {
std::string HostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}
}  // namespace

std::string DefaultTraceFileName(const std::string& role) {
  return absl::StrCat("trace-", role, "-", HostName(), "-", getpid(), ".json");
}

int64_t ServiceTrackId() {
  return 1000000 + static_cast<int64_t>(
                       std::hash<std::string>()(absl::StrCat(HostName(), ":", getpid())) % 1000000);
}

void SetProcessTrack(int64_t pid, const std::string& name, int64_t sort_index) {
  absl::MutexLock lock(&g_running_mu);
  if (g_running != nullptr) g_running->SetTrack(pid, name, sort_index);
}

}  // namespace trace
}  // namespace tandem
