// dataserver: serves datasets to workers as streams of packed batches.
//
//   dataserver --dataset=fashion-mnist/train=/usr/share/datasets/fashion-mnist/train
//              --port=7100 --metrics_port=9100 --prefetch_depth=4 --decode_threads=4
//
// Prints "dataserver listening on HOST:PORT metrics_port=M" once serving
// (and writes PORT to --port_file when given). Bad flags, a port in use or
// a missing dataset file: one line on stderr, exit status 1.
#include <malloc.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/flags/usage.h"
#include "common/rpc/auth.h"
#include "common/rpc/tls_flags.h"
#include "common/trace/trace_flags.h"
#include "services/dataserver/data_server.h"

TANDEM_TLS_FLAGS();  // --tls_cert, --tls_key, --tls_ca, --tls_mutual, --tls_server_name
TANDEM_TRACE_FLAGS();  // --trace, --trace_steps, --trace_file
ABSL_FLAG(std::vector<std::string>, dataset, {},
          "name=path[,name=path...]; path is a directory of .tshard files, a "
          ".tshard file, or an IDX prefix (.../fashion-mnist/train); a bare path "
          "is served under its own path as the name");
ABSL_FLAG(std::string, host, "127.0.0.1", "interface to bind (0.0.0.0 for all)");
ABSL_FLAG(int, port, 0, "gRPC port; 0 picks a free one");
ABSL_FLAG(int, metrics_port, -1, "Prometheus /metrics port; 0 = free, -1 = off");
ABSL_FLAG(int, prefetch_depth, 4, "batches packed ahead per stream");
ABSL_FLAG(int, decode_threads, 4, "threads reading and packing batches");
ABSL_FLAG(int, max_streams, 256, "concurrent streams allowed");
ABSL_FLAG(double, simulate_slow_data_ms, 0,
          "simulated slow storage: each batch takes at least this many ms to read (0 = off)");
ABSL_FLAG(std::string, port_file, "", "if set, the bound port is written here");
ABSL_FLAG(std::string, coordinator, "",
          "coordinator host:port, only to align --trace timestamps to its clock (optional)");
ABSL_FLAG(std::string, token_file, "",
          "file with the job's token every RPC must carry (empty: $TANDEM_TOKEN, else none)");

int main(int argc, char** argv) {
  tandem::flags::InstallFlagUsage("tandem data-shard server");
  absl::ParseCommandLine(argc, argv);
  // gRPC allocates a fresh buffer per large message; with glibc's default
  // mmap threshold each one is mmapped, page-faulted in and unmapped again,
  // which cost 3-6x in throughput (data_bench). Keep them in the heap.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  tandem::dataserver::DataServerOptions options;
  for (const std::string& spec : absl::GetFlag(FLAGS_dataset)) {
    auto parsed = tandem::dataserver::ParseDatasetSpec(spec);
    if (!parsed.ok()) {
      std::fprintf(stderr, "dataserver: %s\n", std::string(parsed.status().message()).c_str());
      return 1;
    }
    options.datasets.push_back(*parsed);
  }
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.service.prefetch_depth = absl::GetFlag(FLAGS_prefetch_depth);
  options.service.decode_threads = absl::GetFlag(FLAGS_decode_threads);
  options.service.max_streams = absl::GetFlag(FLAGS_max_streams);
  if (!(absl::GetFlag(FLAGS_simulate_slow_data_ms) >= 0)) {
    std::fprintf(stderr, "dataserver: --simulate_slow_data_ms must be >= 0\n");
    return 1;
  }
  options.service.read_delay = absl::Milliseconds(absl::GetFlag(FLAGS_simulate_slow_data_ms));
  absl::StatusOr<std::string> token = tandem::LoadAuthToken(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) {
    std::fprintf(stderr, "dataserver: %s\n", std::string(token.status().message()).c_str());
    return 1;
  }
  tandem::SetDefaultAuthToken(*token);
  // TLS on the gRPC plane when --tls_* are given (common/rpc/tls.h).
  if (absl::Status tls = tandem::InstallTls(tandem::TlsOptionsFromFlags()); !tls.ok()) {
    std::fprintf(stderr, "dataserver: %s\n", std::string(tls.message()).c_str());
    return 1;
  }
  options.service.auth_token = *token;
  // Services run until killed: their trace is written on SIGUSR1 (`tandem
  // trace`, and `tandem local` before it stops them).
  auto tracer = tandem::StartTraceFromFlags("dataserver", absl::GetFlag(FLAGS_coordinator));
  if (!tracer.ok()) {
    std::fprintf(stderr, "dataserver: %s\n", std::string(tracer.status().message()).c_str());
    return 1;
  }
  tandem::trace::SetProcessTrack(tandem::trace::ServiceTrackId(), "data server", 1000000);
  auto server = tandem::dataserver::DataServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "dataserver: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%d\n", (*server)->port()) < 0 ||
        std::fclose(f) != 0 || std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      std::fprintf(stderr, "dataserver: cannot write --port_file %s\n", port_file.c_str());
      return 1;
    }
  }
  std::printf("dataserver listening on %s metrics_port=%d\n",
              (*server)->address().c_str(), (*server)->metrics_port());
  std::fflush(stdout);
  (*server)->Wait();
  return 0;
}
