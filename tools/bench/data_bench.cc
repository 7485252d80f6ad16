// data_bench: sustained throughput of one data server to 1, 2 and 4
// streams over loopback gRPC, for Fashion-MNIST (IDX, 784-byte samples) and
// a synthetic record-shard set of large samples (64 KB by default).
//
//   bazel run -c opt //tools/bench:data_bench -- --seconds=3 --streams=1,2,4
//   bazel run -c opt //tools/bench:data_bench -- --step_ms=20   # data-wait %
//
// Each stream is one rank (rank r of world = streams) consuming through the
// real PrefetchClient as fast as it can (or, with --step_ms, sleeping that
// long per batch to stand in for a GPU step, and reporting the fraction of
// time the trainer waited for data). Prints one row per (dataset, streams):
// batches/s, MB/s (features + labels, 1 MB = 1e6 bytes, as the trainer
// gets them), wait % and the process's CPU microseconds per batch (server
// and clients together: the data plane's cost, which load hardly moves).
// --normalize=server,client compares where Fashion-MNIST's u8 pixels become
// f32 in [0, 1]: in the server's packing (4 bytes a pixel on the wire) or in
// the client as they arrive (PrefetchOptions::normalize_here, 1 byte).
#include <sys/resource.h>
#include <sys/stat.h>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/data/prefetch_client.h"
#include "services/dataserver/data_server.h"
#include "tools/convert/convert.h"

ABSL_FLAG(std::string, datasets, "fashion-mnist,synthetic", "which to run");
ABSL_FLAG(std::string, fashion_mnist, "/usr/share/datasets/fashion-mnist/train",
          "IDX prefix of Fashion-MNIST");
ABSL_FLAG(std::string, streams, "1,2,4", "stream counts to run");
ABSL_FLAG(double, seconds, 3.0, "measured seconds per row");
ABSL_FLAG(int64_t, record_bytes, 65536, "synthetic sample size");
ABSL_FLAG(int64_t, synthetic_records, 2048, "synthetic samples (written to --tmp)");
ABSL_FLAG(std::string, tmp, "/tmp/tandem-data-bench", "scratch directory");
ABSL_FLAG(int64_t, fm_local_batch, 256, "Fashion-MNIST samples per stream batch");
ABSL_FLAG(int64_t, syn_local_batch, 16, "synthetic samples per stream batch");
ABSL_FLAG(int, client_prefetch, 4, "client prefetch_depth");
ABSL_FLAG(int, server_prefetch, 4, "server prefetch_depth per stream");
ABSL_FLAG(int, decode_threads, 4, "server packing threads");
ABSL_FLAG(std::string, normalize, "none",
          "comma-separated modes for u8 datasets: none, server, client (a row each)");
ABSL_FLAG(double, step_ms, 0, "simulated step time per batch (sleep); 0 = none");

namespace {

struct Row {
  double batches_per_s, mb_per_s, wait_fraction, cpu_us_per_batch;
};

double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

Row RunStreams(const std::string& address, const std::string& dataset, int streams,
               int64_t local_batch, const std::string& normalize) {
  const double cpu0 = ProcessCpuSeconds();
  std::atomic<int64_t> batches{0}, bytes{0};
  std::atomic<int64_t> wait_ns{0}, total_ns{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  const absl::Duration measure = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const absl::Duration step = absl::Milliseconds(absl::GetFlag(FLAGS_step_ms));
  for (int r = 0; r < streams; ++r) {
    threads.emplace_back([&, r] {
      tandem::data::PrefetchOptions o;
      o.servers = {address};
      o.request.set_dataset(dataset);
      o.request.set_seed(1);
      o.request.set_global_batch_size(local_batch * streams);
      o.request.set_rank(r);
      o.request.set_world_size(streams);
      o.request.set_shuffle(true);
      o.request.set_normalize_to_f32(normalize != "none");
      o.normalize_here = normalize == "client";
      o.prefetch_depth = absl::GetFlag(FLAGS_client_prefetch);
      auto client = tandem::data::PrefetchClient::Start(o);
      if (!client.ok()) {
        std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
        failed = true;
        return;
      }
      for (int i = 0; i < 10; ++i) (void)(*client)->Next();  // warm up
      const absl::Duration wait0 = (*client)->wait_time();
      const absl::Time start = absl::Now();
      int64_t n = 0, b = 0;
      while (absl::Now() - start < measure) {
        auto batch = (*client)->Next();
        if (!batch.ok()) {
          std::fprintf(stderr, "%s\n", batch.status().ToString().c_str());
          failed = true;
          return;
        }
        ++n;
        b += (*batch)->features.size() + (*batch)->labels.size();
        if (step > absl::ZeroDuration()) absl::SleepFor(step);
      }
      const absl::Duration elapsed = absl::Now() - start;
      batches += n;
      bytes += b;
      wait_ns += absl::ToInt64Nanoseconds((*client)->wait_time() - wait0);
      total_ns += absl::ToInt64Nanoseconds(elapsed);
    });
  }
  for (auto& t : threads) t.join();
  if (failed) return {0, 0, 0, 0};
  const double secs = absl::ToDoubleSeconds(measure);
  // Warm-up batches are not counted: a small overestimate, the same for all.
  const double cpu_us = 1e6 * (ProcessCpuSeconds() - cpu0) / std::max<int64_t>(1, batches);
  return {batches / secs, bytes / secs / 1e6,
          static_cast<double>(wait_ns) / static_cast<double>(total_ns), cpu_us};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // gRPC allocates a fresh buffer per large message; with glibc's default
  // mmap threshold each one is mmapped, page-faulted in and unmapped again,
  // which cost 3-6x in throughput (data_bench). Keep them in the heap.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  std::vector<int> stream_counts;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_streams), ',')) {
    int v;
    if (!absl::SimpleAtoi(s, &v) || v < 1) {
      std::fprintf(stderr, "data_bench: bad --streams entry '%s'\n", std::string(s).c_str());
      return 2;
    }
    stream_counts.push_back(v);
  }
  tandem::dataserver::DataServerOptions options;
  options.service.prefetch_depth = absl::GetFlag(FLAGS_server_prefetch);
  options.service.decode_threads = absl::GetFlag(FLAGS_decode_threads);
  const std::string which = absl::GetFlag(FLAGS_datasets);
  struct Set {
    std::string name;
    int64_t local_batch;
  };
  std::vector<Set> sets;
  if (which.find("fashion-mnist") != std::string::npos) {
    options.datasets.push_back({"fashion-mnist", absl::GetFlag(FLAGS_fashion_mnist)});
    sets.push_back({"fashion-mnist", absl::GetFlag(FLAGS_fm_local_batch)});
  }
  if (which.find("synthetic") != std::string::npos) {
    const std::string dir = absl::GetFlag(FLAGS_tmp);
    mkdir(dir.c_str(), 0755);
    const absl::Time t0 = absl::Now();
    auto written = tandem::convert::SyntheticShards(
        absl::GetFlag(FLAGS_synthetic_records), absl::GetFlag(FLAGS_record_bytes), 1,
        {.out_dir = dir, .name = "synthetic", .records_per_shard = 512});
    if (!written.ok()) {
      std::fprintf(stderr, "data_bench: %s\n", written.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %ld synthetic records of %ld bytes in %.1f s\n",
                 written->records, absl::GetFlag(FLAGS_record_bytes),
                 absl::ToDoubleSeconds(absl::Now() - t0));
    options.datasets.push_back({"synthetic", dir});
    sets.push_back({"synthetic", absl::GetFlag(FLAGS_syn_local_batch)});
  }
  auto server = tandem::dataserver::DataServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "data_bench: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("%-14s %9s %7s %11s %10s %10s %8s %12s\n", "dataset", "normalize", "streams",
              "local_batch", "batches/s", "MB/s", "wait%", "cpu_us/batch");
  const std::vector<std::string> modes = absl::StrSplit(absl::GetFlag(FLAGS_normalize), ',');
  for (const Set& set : sets) {
    for (int streams : stream_counts) {
      for (const std::string& mode : modes) {
        // Only u8 pixels can be normalised.
        if (mode != "none" && set.name != "fashion-mnist") continue;
        const Row row =
            RunStreams((*server)->address(), set.name, streams, set.local_batch, mode);
        std::printf("%-14s %9s %7d %11ld %10.1f %10.1f %8.2f %12.1f\n", set.name.c_str(),
                    mode.c_str(), streams, set.local_batch, row.batches_per_s, row.mb_per_s,
                    100.0 * row.wait_fraction, row.cpu_us_per_batch);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
