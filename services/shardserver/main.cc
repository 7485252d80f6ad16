// shardserver: holds a range of the flat parameter vector with its fp32
// master copy and optimizer state; workers of a `--sync ps` or `--sync
// hybrid` job push gradients to it and pull updated parameters.
//
//   shardserver --bind=0.0.0.0 --port=7200 --metrics_port=9200 \
//       --coordinator=10.0.0.1:7000 --job_id=job1 --server_id=shard0
//
// Prints "shardserver listening on HOST:PORT metrics_port=M" once serving
// (and writes PORT to --port_file when given). Bad flags or a port in use:
// one line on stderr, exit status 1.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/flags/usage.h"
#include "common/rpc/auth.h"
#include "common/rpc/tls_flags.h"
#include "common/trace/trace_flags.h"
#include "services/shardserver/push_window.h"
#include "services/shardserver/shard_server.h"

TANDEM_TLS_FLAGS();  // --tls_cert, --tls_key, --tls_ca, --tls_mutual, --tls_server_name
TANDEM_TRACE_FLAGS();  // --trace, --trace_steps, --trace_file
ABSL_FLAG(std::string, bind, "127.0.0.1", "interface to bind (0.0.0.0 for all)");
ABSL_FLAG(int, port, 0, "gRPC port; 0 picks a free one");
ABSL_FLAG(int, metrics_port, -1, "Prometheus /metrics port; 0 = free, -1 = off");
ABSL_FLAG(std::string, server_id, "", "name on the metrics (e.g. shard0)");
ABSL_FLAG(std::string, port_file, "", "if set, the bound port is written here");
ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port to report this server's ranges and bytes served to "
          "(tandem status lists them); empty = none");
ABSL_FLAG(std::string, job_id, "", "the job's id, sent with the reports");
ABSL_FLAG(double, report_seconds, 2, "seconds between reports to --coordinator, > 0");
ABSL_FLAG(std::string, token_file, "",
          "file with the job's token every RPC must carry (empty: $TANDEM_TOKEN, else none)");

int main(int argc, char** argv) {
  tandem::flags::InstallFlagUsage("tandem shard server");
  absl::ParseCommandLine(argc, argv);
  // Large gRPC messages: keep them in the heap instead of mmap per message
  // (as the data server does).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  tandem::shardserver::ShardServerOptions options;
  options.host = absl::GetFlag(FLAGS_bind);
  options.port = absl::GetFlag(FLAGS_port);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.server_id = absl::GetFlag(FLAGS_server_id);
  options.coordinator = absl::GetFlag(FLAGS_coordinator);
  options.job_id = absl::GetFlag(FLAGS_job_id);
  const double report_seconds = absl::GetFlag(FLAGS_report_seconds);
  if (!(report_seconds > 0)) {
    std::fprintf(stderr, "shardserver: --report_seconds must be > 0, got %g\n", report_seconds);
    return 2;
  }
  options.report_period = absl::Seconds(report_seconds);
  // The HTTP/2 window for pushes (shard_server.h); KiB, 0 = gRPC's auto-tuned.
  const char* window_env = std::getenv(tandem::shardserver::kPushWindowEnv);
  absl::StatusOr<int> window =
      tandem::shardserver::PushWindowBytes(window_env, options.flow_window_bytes);
  if (!window.ok()) {
    std::fprintf(stderr, "shardserver: %s\n", std::string(window.status().message()).c_str());
    return 2;
  }
  options.flow_window_bytes = *window;
  if (window_env != nullptr && *window_env != 0) {
    std::fprintf(stderr, "shardserver: %s\n",
                 tandem::shardserver::DescribePushWindow(*window).c_str());
  }
  absl::StatusOr<std::string> token = tandem::LoadAuthToken(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) {
    std::fprintf(stderr, "shardserver: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  tandem::SetDefaultAuthToken(*token);
  // TLS on the gRPC plane when --tls_* are given (common/rpc/tls.h).
  if (absl::Status tls = tandem::InstallTls(tandem::TlsOptionsFromFlags()); !tls.ok()) {
    std::fprintf(stderr, "shardserver: %s\n", std::string(tls.message()).c_str());
    return 2;
  }
  options.auth_token = *token;
  // Services run until killed: their trace is written on SIGUSR1 (`tandem
  // trace`, and `tandem local` before it stops them).
  auto tracer = tandem::StartTraceFromFlags("shardserver", options.coordinator);
  if (!tracer.ok()) {
    std::fprintf(stderr, "shardserver: %s\n", std::string(tracer.status().message()).c_str());
    return 2;
  }
  tandem::trace::SetProcessTrack(tandem::trace::ServiceTrackId(), absl::StrCat("shard server ", options.server_id), 1000000);
  auto server = tandem::shardserver::ShardServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "shardserver: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%d\n", (*server)->port()) < 0 ||
        std::fclose(f) != 0 || std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::fprintf(stderr, "shardserver: cannot write --port_file %s\n", port_file.c_str());
      return 1;
    }
  }
  std::printf("shardserver listening on %s metrics_port=%d\n", (*server)->address().c_str(),
              (*server)->metrics_port());
  std::fflush(stdout);
  (*server)->Wait();
  return 0;
}
