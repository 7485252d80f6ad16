// tandem: the command-line front end.
//
//   tandem local --workers 4 --model mlp:784,1024,1024,10 --dataset fashion-mnist
//                --epochs 2 --batch-size 64 --lr 0.05 --optimizer sgd
//   tandem status --coordinator 127.0.0.1:7000 [--job-id local]
//
// Flags may be spelled with dashes or underscores. This file only turns
// flags into options; the work is in //tools/tandem:local_run and :job_status.
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "tools/tandem/args.h"
#include "tools/tandem/job_status.h"
#include "tools/tandem/local_options.h"
#include "tools/tandem/local_run.h"

namespace {
const tandem::cli::LocalOptions kDefaults;
}  // namespace

// tandem local
ABSL_FLAG(int, workers, kDefaults.workers, "Worker processes to start.");
ABSL_FLAG(int, min_workers, kDefaults.min_workers, "Coordinator min workers (0 = --workers).");
ABSL_FLAG(int, max_workers, kDefaults.max_workers, "Coordinator max workers (0 = --workers).");
ABSL_FLAG(std::string, model, kDefaults.model, "Model spec, e.g. mlp:784,1024,1024,10.");
ABSL_FLAG(std::string, dataset, kDefaults.dataset, "Dataset name (fashion-mnist).");
ABSL_FLAG(std::string, data_root, kDefaults.data_root, "Directory holding the datasets.");
ABSL_FLAG(int, epochs, kDefaults.epochs, "Epochs to train.");
ABSL_FLAG(int, batch_size, kDefaults.batch_size, "Batch size per worker.");
ABSL_FLAG(int, accumulation, kDefaults.accumulation, "Micro-steps per step (0 = worker default).");
ABSL_FLAG(double, lr, kDefaults.lr, "Learning rate.");
ABSL_FLAG(std::string, optimizer, kDefaults.optimizer, "sgd or adamw.");
ABSL_FLAG(std::string, lr_scaling, "", "linear, sqrt or none (empty = worker default).");
ABSL_FLAG(std::string, schedule, "", "LR schedule (empty = worker default).");
ABSL_FLAG(int, warmup_steps, kDefaults.warmup_steps, "Warm-up steps (-1 = worker default).");
ABSL_FLAG(double, momentum, kDefaults.momentum, "SGD momentum (-1 = worker default).");
ABSL_FLAG(double, weight_decay, kDefaults.weight_decay, "Weight decay (-1 = worker default).");
ABSL_FLAG(double, bucket_cap_mb, kDefaults.bucket_cap_mb, "Bucket size (-1 = worker default).");
ABSL_FLAG(int, checkpoint_every, kDefaults.checkpoint_every,
          "Steps between checkpoints (-1 = worker default).");
ABSL_FLAG(int64_t, max_steps, kDefaults.max_steps, "Stop after this many steps (0 = all).");
ABSL_FLAG(int, seed, kDefaults.seed, "Seed for model init and data order.");
ABSL_FLAG(int, log_every, kDefaults.log_every, "Steps between progress lines.");
ABSL_FLAG(std::string, backend, kDefaults.backend, "cpu or cuda.");
ABSL_FLAG(std::vector<std::string>, worker_arg, {},
          "Extra worker flags, comma-separated (e.g. --worker-arg=--foo=1).");
ABSL_FLAG(std::string, host, kDefaults.host, "Interface every process binds.");
ABSL_FLAG(int, port, kDefaults.port, "Coordinator gRPC port (0 = a free one).");
ABSL_FLAG(std::string, job_id, kDefaults.job_id, "Job name.");
ABSL_FLAG(int, heartbeat_ms, kDefaults.heartbeat_ms, "Worker heartbeat period.");
ABSL_FLAG(int, heartbeat_misses, kDefaults.heartbeat_misses, "Misses that end a generation.");
ABSL_FLAG(double, settle_seconds, kDefaults.settle_seconds, "Rendezvous settle time.");
ABSL_FLAG(std::string, bin_dir, "", "Where the service binaries are (default: runfiles).");
ABSL_FLAG(std::string, run_dir, "", "Logs and state (default: a fresh /tmp/tandem-local-*).");
ABSL_FLAG(bool, keep_going, false,
          "Leave a dead worker to the coordinator instead of stopping everything.");
ABSL_FLAG(double, grace_seconds, 5, "SIGTERM-to-SIGKILL grace when stopping processes.");
// tandem status
ABSL_FLAG(std::string, coordinator, "", "host:port of a running coordinator (status).");

namespace {

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

constexpr char kUsage[] =
    "usage:\n"
    "  tandem local  [--workers 4] [--model mlp:784,1024,1024,10] [--dataset fashion-mnist]\n"
    "                [--epochs 2] [--batch-size 64] [--lr 0.05] [--optimizer sgd|adamw] ...\n"
    "  tandem status --coordinator host:port [--job-id local]\n"
    "run `tandem --helpfull` for every flag";

std::string SelfExe(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  return std::string(buf, static_cast<size_t>(n));
}

int Local() {
  tandem::cli::LocalOptions o;
  o.workers = absl::GetFlag(FLAGS_workers);
  o.min_workers = absl::GetFlag(FLAGS_min_workers);
  o.max_workers = absl::GetFlag(FLAGS_max_workers);
  o.model = absl::GetFlag(FLAGS_model);
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.data_root = absl::GetFlag(FLAGS_data_root);
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.batch_size = absl::GetFlag(FLAGS_batch_size);
  o.accumulation = absl::GetFlag(FLAGS_accumulation);
  o.lr = absl::GetFlag(FLAGS_lr);
  o.optimizer = absl::GetFlag(FLAGS_optimizer);
  o.lr_scaling = absl::GetFlag(FLAGS_lr_scaling);
  o.schedule = absl::GetFlag(FLAGS_schedule);
  o.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.momentum = absl::GetFlag(FLAGS_momentum);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.log_every = absl::GetFlag(FLAGS_log_every);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.worker_args = absl::GetFlag(FLAGS_worker_arg);
  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_port);
  o.job_id = absl::GetFlag(FLAGS_job_id);
  o.heartbeat_ms = absl::GetFlag(FLAGS_heartbeat_ms);
  o.heartbeat_misses = absl::GetFlag(FLAGS_heartbeat_misses);
  o.settle_seconds = absl::GetFlag(FLAGS_settle_seconds);
  o.bin_dir = absl::GetFlag(FLAGS_bin_dir);
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  o.keep_going = absl::GetFlag(FLAGS_keep_going);
  o.grace = absl::Seconds(absl::GetFlag(FLAGS_grace_seconds));

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

  tandem::cli::LocalEnv env;
  env.self_exe = SelfExe("tandem");
  env.out = stdout;
  env.stop_requested = [] { return g_signal != 0; };
  absl::Status s = tandem::cli::RunLocal(o, env);
  if (!s.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem local: %s\n", std::string(s.message()).c_str());
    return g_signal != 0 ? 128 + g_signal : 1;
  }
  return 0;
}

int Status() {
  const std::string target = absl::GetFlag(FLAGS_coordinator);
  if (target.empty()) {
    std::fprintf(stderr, "tandem status: pass --coordinator host:port (printed by tandem local)\n");
    return 2;
  }
  auto s = tandem::cli::FetchJobStatus(target, absl::GetFlag(FLAGS_job_id), absl::Seconds(5));
  if (!s.ok()) {
    std::fprintf(stderr, "tandem status: %s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  std::fputs(tandem::cli::FormatJobStatus(*s).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<std::string> args(argv, argv + argc);
  args = tandem::cli::NormalizeFlagArgs(args);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(cargs.size()), cargs.data());
  if (rest.size() != 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  const std::string command = rest[1];
  if (command == "local") return Local();
  if (command == "status") return Status();
  std::fprintf(stderr, "tandem: unknown command '%s'\n%s\n", command.c_str(), kUsage);
  return 2;
}
