// tandem: the command-line front end.
//
//   tandem local --workers 4 --model mlp:784,1024,1024,10 --dataset fashion-mnist
//                --epochs 2 --batch-size 64 --lr 0.05 --optimizer sgd
//   tandem status --coordinator 127.0.0.1:7000 [--job-id local]
//   tandem exec -- worker --coordinator=...   (the right OPENBLAS_CORETYPE, then exec)
//   tandem doctor --run_dir /tmp/tandem-local-XXXXXX
//   tandem add-worker --run_dir /tmp/tandem-local-XXXXXX   (scale up, to --max_workers)
//   tandem trace --run_dir /tmp/tandem-local-XXXXXX   (merge a --trace run's timelines)
//   tandem convert --mode=npy --features=X.npy --labels=Y.npy --out_dir=DIR
//   tandem plan --model mlp:784,1024,1024,10 --nodes 2 --workers_per_node 2 --link 1gbit
//   tandem --help | tandem local --help | tandem status --help
//
// Every flag, its default and its meaning are in one table per command
// (//tools/tandem:commands); this file only maps the parse to an exit code
// and runs the command (//tools/tandem:local_run, :job_status).
// Exit status: 0 done or help, 2 a usage error or bad flag value (nothing was
// started), 1 the run failed, 128+N interrupted by signal N.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "common/kernels/blas_core.h"
#include "tools/tandem/autotune.h"
#include "tools/tandem/add_worker.h"
#include "tools/tandem/commands.h"
#include "common/rpc/auth.h"
#include "common/rpc/tls.h"
#include "tools/tandem/doctor_command.h"
#include "tools/tandem/job_status.h"
#include "tools/tandem/local_options.h"
#include "tools/tandem/local_run.h"
#include "tools/tandem/plan_command.h"
#include "tools/tandem/run_dir.h"
#include "tools/tandem/trace_command.h"

namespace {

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

std::string SelfExe(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  return std::string(buf, static_cast<size_t>(n));
}

int Local(const tandem::cli::LocalOptions& o, const char* argv0) {
  // Checked before any signal handling or process: bad input exits at once.
  if (absl::Status s = tandem::cli::ValidateLocalOptions(o); !s.ok()) {
    std::fprintf(stderr, "tandem local: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // One run per run directory, and what an earlier run left there: before
  // anything in it is touched (and before --autotune's trials).
  std::unique_ptr<tandem::cli::RunDirLock> lock;
  if (!o.run_dir.empty()) {
    auto locked = tandem::cli::RunDirLock::Acquire(o.run_dir);
    auto prior = locked.ok() ? tandem::cli::InspectRunDir(o.run_dir, o.job_id)
                             : absl::StatusOr<tandem::cli::PriorRun>(locked.status());
    if (!prior.ok()) {
      std::fprintf(stderr, "tandem local: %s\n", std::string(prior.status().message()).c_str());
      return 2;
    }
    lock = std::move(*locked);
    if (prior->kind == tandem::cli::PriorRun::kFinished) {
      std::printf("%s\n", tandem::cli::FinishedMessage(*prior).c_str());
      return 0;
    }
    if (prior->kind == tandem::cli::PriorRun::kInterrupted) {
      std::printf("%s\n", tandem::cli::ResumeMessage(*prior).c_str());
      std::fflush(stdout);
    }
  }
  tandem::cli::LocalEnv env;
  env.self_exe = SelfExe(argv0);
  env.out = stdout;
  env.stop_requested = [] { return g_signal != 0; };
  tandem::cli::LocalOptions run = o;
  if (o.autotune) {
    auto tuned = tandem::cli::RunAutotune(o, env);
    if (!tuned.ok()) {
      std::fprintf(stderr, "tandem local: %s\n", std::string(tuned.status().message()).c_str());
      return g_signal != 0 ? 128 + g_signal : 1;
    }
    std::fputs(tandem::cli::FormatAutotune(*tuned).c_str(), stdout);
    std::fflush(stdout);
    run = tuned->chosen_options;
  }
  absl::Status s = tandem::cli::RunLocal(run, env);
  if (!s.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem local: %s\n", std::string(s.message()).c_str());
    return g_signal != 0 ? 128 + g_signal : 1;
  }
  return 0;
}

int Doctor(const tandem::cli::DoctorCliOptions& o) {
  auto text = tandem::cli::RunDoctor(o);
  if (!text.ok()) {
    std::fprintf(stderr, "tandem doctor: %s\n", std::string(text.status().message()).c_str());
    return absl::IsInvalidArgument(text.status()) ? 2 : 1;
  }
  std::fputs(text->c_str(), stdout);
  return 0;
}

int AddWorker(const tandem::cli::AddWorkerCliOptions& o) {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  tandem::cli::AddWorkerOptions a;
  a.run_dir = o.run_dir;
  absl::Status s = tandem::cli::RunAddWorker(a, stdout, [] { return g_signal != 0; });
  if (!s.ok()) {
    std::fprintf(stderr, "tandem add-worker: %s\n", std::string(s.message()).c_str());
    if (absl::IsInvalidArgument(s)) return 2;
    return g_signal != 0 ? 128 + g_signal : 1;
  }
  return 0;
}

int Trace(const tandem::cli::TraceCliOptions& o) {
  if (o.run_dir.empty() == o.dir.empty()) {
    std::fprintf(stderr,
                 "tandem trace: pass one of --run_dir DIR (printed by tandem local --trace) or "
                 "--dir DIR (a folder of --trace_file=DIR/ files)\n");
    return 2;
  }
  auto c = o.dir.empty() ? tandem::cli::CollectRunTrace(o.run_dir, o.timeout)
                         : tandem::cli::MergeTraceDir(o.dir);
  if (!c.ok()) {
    std::fprintf(stderr, "tandem trace: %s\n", std::string(c.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", tandem::cli::FormatTraceCollection(*c).c_str());
  return 0;
}

int Plan(const tandem::cli::PlanOptions& o) {
  const char* home = std::getenv("HOME");
  auto text = tandem::cli::RunPlan(o, home != nullptr ? home : "");
  if (!text.ok()) {
    std::fprintf(stderr, "tandem plan: %s\n", std::string(text.status().message()).c_str());
    return absl::IsInvalidArgument(text.status()) ? 2 : 1;
  }
  std::fputs(text->c_str(), stdout);
  return 0;
}

int Status(const tandem::cli::StatusOptions& o) {
  if (o.coordinator.empty()) {
    std::fprintf(stderr,
                 "tandem status: pass --coordinator host:port (printed by tandem local); run "
                 "`tandem status --help`\n");
    return 2;
  }
  auto token = tandem::LoadAuthToken(o.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "tandem status: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  tandem::SetDefaultAuthToken(*token);
  auto tls = tandem::LoadTls(o.tls);
  if (!tls.ok()) {
    std::fprintf(stderr, "tandem status: %s\n", std::string(tls.status().message()).c_str());
    return 2;
  }
  tandem::SetDefaultTls(*tls);
  auto s = tandem::cli::FetchJobStatus(o.coordinator, o.job_id, o.timeout);
  if (!s.ok()) {
    // tandem local's token lives in its run directory, which says whether
    // a job whose coordinator is gone finished.
    const size_t slash = o.token_file.rfind('/');
    const std::string run_dir = slash == std::string::npos ? "" : o.token_file.substr(0, slash);
    std::fprintf(stderr, "tandem status: %s\n",
                 tandem::cli::ExplainStatusFailure(o.coordinator, s.status(), tls->enabled, run_dir)
                     .c_str());
    return 1;
  }
  std::fputs(tandem::cli::FormatJobStatus(*s).c_str(), stdout);
  return 0;
}

}  // namespace

// `tandem exec [--] PROGRAM [ARGS...]`: runs PROGRAM with the
// OPENBLAS_CORETYPE tandem would give its own children (the container
// entrypoints and Helm pods use it: the variable must be set before
// OpenBLAS loads, so a process cannot fix its own). A value the
// environment already set passes through untouched.
int Exec(int argc, char** argv) {
  int first = 2;
  if (first < argc && (std::string(argv[first]) == "--help" || std::string(argv[first]) == "-h")) {
    auto c = tandem::cli::ParseCommandLine({"help", "exec"});
    std::fputs(c.ok() ? c->help_text.c_str() : "", stdout);
    return 0;
  }
  if (first < argc && std::string(argv[first]) == "--") ++first;
  if (first >= argc) {
    std::fprintf(stderr, "tandem exec: give the program to run: tandem exec -- PROGRAM [ARGS...]\n");
    return 2;
  }
  const std::string assignment = tandem::kernels::OpenblasCoretypeForChildren(
      getenv("OPENBLAS_CORETYPE"), tandem::kernels::DetectCpuFeatures(),
      tandem::kernels::OpenblasCoreName());
  if (!assignment.empty()) {
    setenv("OPENBLAS_CORETYPE", assignment.substr(assignment.find('=') + 1).c_str(), 1);
  }
  execvp(argv[first], argv + first);
  std::fprintf(stderr, "tandem exec: cannot run %s: %s\n", argv[first], std::strerror(errno));
  return 127;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "exec") return Exec(argc, argv);
  auto c = tandem::cli::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!c.ok()) {
    std::fprintf(stderr, "tandem: %s\n", std::string(c.status().message()).c_str());
    return 2;
  }
  if (c->help) {
    std::fputs(c->help_text.c_str(), stdout);
    return 0;
  }
  if (c->command == "local") return Local(c->local, argv[0]);
  if (c->command == "plan") return Plan(c->plan);
  if (c->command == "doctor") return Doctor(c->doctor);
  if (c->command == "add-worker") return AddWorker(c->add_worker);
  if (c->command == "trace") return Trace(c->trace);
  if (c->command == "convert") return tandem::cli::RunConvertCommand(c->convert, stdout, stderr);
  return Status(c->status);
}
