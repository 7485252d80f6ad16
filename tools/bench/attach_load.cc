// What open Coordinator.Attach calls cost a running coordinator process:
// its thread count and CPU time while idle, first with no call open, then
// with --calls calls open (as --calls worker processes would hold them).
// Run by attach_threads.sh against two coordinator binaries side by side.
//
//   attach_load --coordinator=127.0.0.1:7000 --pid=1234 --calls=256 --seconds=10
//
// Prints one line: calls, the coordinator's threads without and with the
// calls, and its CPU milliseconds per wall second over --seconds of each.
// Exits 1 with a message when the coordinator cannot be read or reached.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc/channel.h"
#include "proto/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, coordinator, "", "host:port of the coordinator to load.");
ABSL_FLAG(int, pid, 0, "The coordinator's pid (its /proc entry is read).");
ABSL_FLAG(std::string, job_id, "tandem", "The coordinator's --job_id.");
ABSL_FLAG(int, calls, 256, "Attach calls to hold open.");
ABSL_FLAG(double, seconds, 10, "Idle seconds measured with and without the calls.");

namespace {

// The process's thread count and CPU seconds (user + system), or -1s.
struct ProcSample {
  int threads = -1;
  double cpu_seconds = -1;
};

ProcSample Sample(int pid) {
  ProcSample s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) s.threads = std::stoi(line.substr(8));
  }
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the parenthesised command name; utime and stime are the
  // 14th and 15th fields of the line, the 12th and 13th after ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return s;
  std::istringstream rest(text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; rest >> x;) f.push_back(x);
  if (f.size() < 13) return s;
  s.cpu_seconds =
      static_cast<double>(std::stoll(f[11]) + std::stoll(f[12])) / sysconf(_SC_CLK_TCK);
  return s;
}

// CPU milliseconds per wall second the process spends over `seconds`.
double IdleCpu(int pid, double seconds) {
  const ProcSample before = Sample(pid);
  absl::SleepFor(absl::Seconds(seconds));  // the measurement window itself
  const ProcSample after = Sample(pid);
  return 1e3 * (after.cpu_seconds - before.cpu_seconds) / seconds;
}

struct OpenCall {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<tandem::v1::AttachResponse>> reader;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int pid = absl::GetFlag(FLAGS_pid);
  const int calls = absl::GetFlag(FLAGS_calls);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  if (pid <= 0 || Sample(pid).threads < 0 || absl::GetFlag(FLAGS_coordinator).empty()) {
    std::fprintf(stderr, "attach_load: give --coordinator=host:port and the --pid of a running "
                         "coordinator\n");
    return 1;
  }
  auto stub = tandem::v1::Coordinator::NewStub(
      tandem::MakeChannel({.target = absl::GetFlag(FLAGS_coordinator)}));
  const int idle_threads = Sample(pid).threads;
  const double idle_cpu = IdleCpu(pid, seconds);
  std::vector<std::unique_ptr<OpenCall>> open;
  for (int i = 0; i < calls; ++i) {
    auto call = std::make_unique<OpenCall>();
    tandem::v1::AttachRequest r;
    r.mutable_job()->set_job_id(absl::GetFlag(FLAGS_job_id));
    r.set_worker_id(absl::StrCat("bench-", i));
    r.set_instance(absl::StrCat("bench-", i, "@", getpid()));
    call->reader = stub->Attach(&call->ctx, r);
    tandem::v1::AttachResponse reply;
    if (!call->reader->Read(&reply)) {
      const grpc::Status s = call->reader->Finish();
      std::fprintf(stderr, "attach_load: call %d of %d not registered: %s\n", i + 1, calls,
                   s.error_message().c_str());
      return 1;
    }
    open.push_back(std::move(call));
  }
  const int open_threads = Sample(pid).threads;
  const double open_cpu = IdleCpu(pid, seconds);
  std::printf("calls %d threads %d -> %d cpu_ms_per_s %.1f -> %.1f\n", calls, idle_threads,
              open_threads, idle_cpu, open_cpu);
  for (auto& call : open) call->ctx.TryCancel();
  for (auto& call : open) (void)call->reader->Finish();
  return 0;
}
