// The worker's side of the data plane: a background thread streams this
// rank's batches from a data server (tandem.v1.DataServer.StreamBatches)
// and keeps up to prefetch_depth of them ready in reusable host buffers.
//
//   PrefetchOptions o;
//   o.servers = {"10.0.0.5:7100", "10.0.0.6:7100"};  // rank r starts at r % 2
//   o.request.set_dataset("fashion-mnist/train");
//   o.request.set_global_batch_size(256);
//   o.request.set_rank(rank);
//   o.request.set_world_size(world);
//   o.request.set_epoch(ckpt.epoch);                 // resume cursor
//   o.request.set_step_in_epoch(ckpt.step_in_epoch);
//   ASSIGN_OR_RETURN(auto client, PrefetchClient::Start(o));
//   for (;;) {
//     ASSIGN_OR_RETURN(const HostBatch* b, client->Next());
//     Train(*b);
//     ckpt.cursor = client->cursor();  // what to resume from
//   }
//
// Failures of the connection (server killed, restarted, unreachable) are
// retried with exponential backoff, moving to the next server in the list,
// and the stream resumes at the cursor after the last batch received, so the
// trainer sees every batch exactly once. Errors the server reports about the
// request (NOT_FOUND, INVALID_ARGUMENT, DATA_LOSS, ...) are returned by Next.
//
// Thread-safety: Next/cursor from one consumer thread; the rest is internal.
// Ownership: the client owns its thread, channels and buffers; a HostBatch
// from Next() stays valid until the following Next() or destruction.
// Buffers are allocated once (depth+1 of them) and reused: steady-state
// Next() allocates nothing. Pinned memory and the host-to-device copy
// belong to the GPU build (not in this CPU library).
//
// Throughput note: gRPC allocates a new buffer per received message. A
// process receiving MB-sized batches should raise glibc's mmap threshold in
// its main() (mallopt(M_MMAP_THRESHOLD, 256 << 20) and a large
// M_TRIM_THRESHOLD), as services/dataserver/main.cc and data_bench do:
// otherwise every batch is mmapped, page-faulted and unmapped (3-6x slower).
#ifndef TANDEM_COMMON_DATA_PREFETCH_CLIENT_H_
#define TANDEM_COMMON_DATA_PREFETCH_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data/sampler.h"
#include "common/metrics/metrics.h"
#include "proto/dataserver.grpc.pb.h"

namespace tandem {
namespace data {

// One rank's slice of one global batch, in host memory.
struct HostBatch {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  bool last_in_epoch = false;
  int64_t start_position = 0;  // the epoch's slicing offset (Batch.start_position)
  int64_t end_position = 0;    // samples of the epoch consumed after this batch
  v1::DType feature_dtype = v1::DTYPE_UNSPECIFIED;
  v1::DType label_dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> feature_shape;  // [n, ...]
  std::vector<int64_t> label_shape;    // [n, ...]
  std::string features;                // raw bytes, row-major
  std::string labels;
  std::vector<int64_t> sample_ids;     // n dataset indices
  int64_t size() const { return static_cast<int64_t>(sample_ids.size()); }
};

// Client metrics, created once per process and shared by clients.
struct ClientMetrics {
  prometheus::Counter* wait_seconds = nullptr;  // tandem_data_wait_seconds_total
  prometheus::Counter* reconnects = nullptr;    // tandem_data_reconnects_total
  prometheus::Counter* batches = nullptr;       // tandem_data_batches_received_total
  prometheus::Counter* bytes = nullptr;         // tandem_data_bytes_received_total
  static absl::StatusOr<ClientMetrics> Create(Metrics* metrics);
};

struct PrefetchOptions {
  std::vector<std::string> servers;  // "host:port"; rank r starts at r % size
  // What to stream: dataset, seed, batch, rank, world, start cursor (epoch,
  // step_in_epoch, start_position), remainder, shuffle, normalize. max_batches is the total
  // this client delivers (0 = unlimited), across reconnects.
  v1::StreamBatchesRequest request;
  int prefetch_depth = 4;                          // batches kept ready, >= 1
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Seconds(1);
  // Consecutive failed attempts (no batch received) before Next() returns
  // UNAVAILABLE. With the defaults about 40 s of outage are ridden out.
  int max_attempts = 45;
  const ClientMetrics* metrics = nullptr;          // optional, must outlive
  // With request.normalize_to_f32: ask the server for the u8 features as
  // they are and turn them into f32 (x * (1 / 255), the server's formula:
  // the same floats) on this client's thread, so a quarter of the bytes go
  // through the server's packing, gRPC and TCP. Features that are not u8
  // then fail the stream with INVALID_ARGUMENT, as the server would. False:
  // the server normalises (the protocol's normalize_to_f32 as sent).
  bool normalize_here = true;
};

class PrefetchClient {
 public:
  // INVALID_ARGUMENT for an empty server list, depth < 1, batch 0, bad rank.
  static absl::StatusOr<std::unique_ptr<PrefetchClient>> Start(
      PrefetchOptions options);
  ~PrefetchClient();  // cancels the stream and joins the thread
  PrefetchClient(const PrefetchClient&) = delete;
  PrefetchClient& operator=(const PrefetchClient&) = delete;

  // Blocks until the next batch is ready. OUT_OF_RANGE after max_batches;
  // otherwise the first permanent error (repeated on later calls).
  absl::StatusOr<const HostBatch*> Next();

  // The cursor after the last batch Next() returned (the start cursor
  // before the first): store it in checkpoints, resume from it.
  Cursor cursor() const { return consumer_cursor_; }
  int64_t reconnects() const;
  absl::Duration wait_time() const { return wait_time_; }

 private:
  explicit PrefetchClient(PrefetchOptions options);
  void Run();
  // Streams from `server` starting at the producer cursor; returns the
  // stream's final status and whether any batch arrived.
  grpc::Status StreamOnce(int server, bool* received_any);
  // OK, or INVALID_ARGUMENT when normalize_here meets features not u8.
  grpc::Status Fill(v1::Batch* msg, HostBatch* slot);

  const PrefetchOptions options_;
  const bool normalize_here_;  // normalize_here and request.normalize_to_f32
  std::vector<std::unique_ptr<v1::DataServer::Stub>> stubs_;
  std::vector<HostBatch> slots_;  // depth + 1, reused
  v1::Batch msg_;                 // producer's receive buffer, reused
  Cursor consumer_cursor_;
  absl::Duration wait_time_;
  bool holding_ = false;          // consumer holds slot consumed_ % size

  mutable absl::Mutex mu_;
  int64_t produced_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t consumed_ ABSL_GUARDED_BY(mu_) = 0;  // released by the consumer
  Cursor producer_cursor_ ABSL_GUARDED_BY(mu_);
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);  // set when producer ends
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t reconnects_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_PREFETCH_CLIENT_H_
