// tandem coordinator: parses flags into CoordinatorServerOptions and runs.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/flags/usage.h"
#include "common/log/log.h"
#include "common/rpc/auth.h"
#include "common/rpc/tls_flags.h"
#include "services/coordinator/coordinator_server.h"

TANDEM_TLS_FLAGS();  // --tls_cert, --tls_key, --tls_ca, --tls_mutual, --tls_server_name
ABSL_FLAG(std::string, job_id, "tandem", "Name of the job this coordinator runs.");
ABSL_FLAG(std::string, host, "127.0.0.1", "Interface for gRPC (0.0.0.0 for remote workers).");
ABSL_FLAG(int, port, 0, "gRPC port; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, port_file, "", "If set, the bound gRPC port is written here.");
ABSL_FLAG(int, metrics_port, -1, "Port for /metrics; 0 picks a free one, -1 disables.");
ABSL_FLAG(int, min_workers, 1, "Workers needed before a generation forms.");
ABSL_FLAG(int, max_workers, 1, "Most workers a generation takes.");
ABSL_FLAG(double, settle_seconds, 1.0, "Wait this long after the last join (once min is met).");
ABSL_FLAG(int, heartbeat_ms, 1000, "Heartbeat period workers must keep.");
ABSL_FLAG(int, heartbeat_misses, 3, "Missed heartbeats that end a generation.");
ABSL_FLAG(double, step_time_factor, 5,
          "A worker's heartbeat tolerance grows to this many times its reported step time "
          "(a loaded machine slows heartbeats as much as steps); 0: heartbeats only.");
ABSL_FLAG(std::string, state_dir, "", "Directory for durable job state (empty: none).");
ABSL_FLAG(std::string, token_file, "",
          "File with the job's token every RPC must carry (empty: $TANDEM_TOKEN, else none).");
ABSL_FLAG(int64_t, global_batch_size, 0, "Global batch size handed to workers (0: theirs).");
ABSL_FLAG(std::string, batch_auto, "",
          "MIN,MAX: dynamic batch sizing; pick the goodput-maximising global batch (samples per "
          "optimizer step) in MIN..MAX from rank 0's throughput and gradient-noise reports, for "
          "workers started with --batch auto (empty: off).");
ABSL_FLAG(double, straggler_threshold, 0.25,
          "Name a rank a straggler when its step time (compute + data wait + own network time) "
          "is at least this fraction above the median of the other ranks (0.25: 25% slower).");
ABSL_FLAG(int, straggler_window, 5,
          "Consecutive heartbeat reports (about one a second) a rank must be that slow to be "
          "named, and back within half the threshold to be cleared.");

int main(int argc, char** argv) {
  tandem::flags::InstallFlagUsage("tandem coordinator: rendezvous, heartbeats, checkpoints.");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "coordinator: unexpected argument '%s' (flags are --name=value)\n",
                 rest[1]);
    return 2;
  }
  // Block SIGINT/SIGTERM in every thread (threads inherit the mask) and
  // wait for them synchronously below: no work in a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  tandem::CoordinatorServerOptions o;
  o.coordinator.job_id = absl::GetFlag(FLAGS_job_id);
  o.coordinator.min_workers = absl::GetFlag(FLAGS_min_workers);
  o.coordinator.max_workers = absl::GetFlag(FLAGS_max_workers);
  o.coordinator.settle_time = absl::Seconds(absl::GetFlag(FLAGS_settle_seconds));
  o.coordinator.heartbeat_period = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_ms));
  o.coordinator.heartbeat_misses = absl::GetFlag(FLAGS_heartbeat_misses);
  o.coordinator.step_time_factor = absl::GetFlag(FLAGS_step_time_factor);
  o.coordinator.state_dir = absl::GetFlag(FLAGS_state_dir);
  o.coordinator.global_batch_size = absl::GetFlag(FLAGS_global_batch_size);
  o.coordinator.straggler.threshold = absl::GetFlag(FLAGS_straggler_threshold);
  o.coordinator.straggler.window = absl::GetFlag(FLAGS_straggler_window);
  if (const std::string b = absl::GetFlag(FLAGS_batch_auto); !b.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(b, ',');
    int64_t lo = 0, hi = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &lo) || !absl::SimpleAtoi(parts[1], &hi) ||
        lo < 1 || hi < lo) {
      std::fprintf(stderr, "coordinator: --batch_auto %s: expected MIN,MAX with 1 <= MIN <= MAX\n",
                   b.c_str());
      return 2;
    }
    o.coordinator.batch_auto.min_global_batch = lo;
    o.coordinator.batch_auto.max_global_batch = hi;
  }
  o.rpc.host = absl::GetFlag(FLAGS_host);
  o.rpc.port = absl::GetFlag(FLAGS_port);
  o.metrics.port = absl::GetFlag(FLAGS_metrics_port);
  absl::StatusOr<std::string> token = tandem::LoadAuthToken(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", std::string(token.status().message()).c_str());
    return 1;
  }
  tandem::SetDefaultAuthToken(*token);
  // TLS on the gRPC plane when --tls_* are given (common/rpc/tls.h).
  if (absl::Status tls = tandem::InstallTls(tandem::TlsOptionsFromFlags()); !tls.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", std::string(tls.message()).c_str());
    return 1;
  }
  o.auth_token = *token;

  auto server = tandem::CoordinatorServer::Start(o);
  if (!server.ok()) {
    std::fprintf(stderr, "coordinator: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    std::ofstream f(port_file + ".tmp");
    f << (*server)->port() << "\n";
    f.close();
    if (!f || std::rename((port_file + ".tmp").c_str(), port_file.c_str()) != 0) {
      std::fprintf(stderr, "coordinator: cannot write --port_file %s\n", port_file.c_str());
      return 1;
    }
  }
  LOG(INFO) << "coordinator: job '" << o.coordinator.job_id << "' listening on " << o.rpc.host
            << ":" << (*server)->port() << ", metrics port " << (*server)->metrics_port();

  int sig = 0;
  sigwait(&signals, &sig);
  LOG(INFO) << "coordinator: shutting down";
  (*server)->Shutdown();
  return 0;
}
