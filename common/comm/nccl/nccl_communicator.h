// NcclCommunicator: Communicator over NCCL for GPU workers; buffers are
// device memory of `device`.
//
//   NcclOptions o;
//   o.rank = r;  o.world_size = w;  o.device = 0;
//   o.kv = {put, get};                  // e.g. the coordinator's KV store
//   o.prefix = "gen7/grad";             // one communicator per prefix
//   o.wait_stream = backend->stream();  // collectives see the compute work
//   ASSIGN_OR_RETURN(auto comm, NcclCommunicator::Create(o));
//   RETURN_IF_ERROR(comm->AllReduce(device_grads, n));
//
// Bootstrap: rank 0 makes the NCCL unique id and puts it under
// "<prefix>/nccl_unique_id" in the KV; the others get it (waiting up to the
// timeout). The communicator is created in NCCL's non-blocking mode, so no
// NCCL call can block forever: initialisation and every collective are
// polled (ncclCommGetAsyncError, cudaStreamQuery) until they finish, fail or
// pass the timeout; a failure or timeout aborts the communicator
// (ncclCommAbort) and returns a Status naming the operation and rank
// (DEADLINE_EXCEEDED for a timeout, UNAVAILABLE for a peer / network error).
// After that every call returns FAILED_PRECONDITION: destroy it and build
// a new one for the next generation.
//
// Each collective runs on a CUDA stream this object owns and returns once it
// has completed on the device, so results are visible to any stream
// afterwards (the Communicator contract is synchronous; overlap comes from
// calling it on the sync engine's communication thread). If wait_stream is
// set, each collective first waits for the work enqueued on it so far (an
// event recorded at call time), so it never reads gradients still being
// written. Nothing is allocated per call.
//
// Thread-safety: not thread-safe (see Communicator); any one thread at a
// time may call it (the device is made current on each call). Ownership:
// owns the NCCL communicator, its stream, an event and a 4-byte device
// scratch; the KV functions are used only inside Create().
#ifndef TANDEM_COMMON_COMM_NCCL_NCCL_COMMUNICATOR_H_
#define TANDEM_COMMON_COMM_NCCL_NCCL_COMMUNICATOR_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/comm/communicator.h"

namespace tandem {

// The small key-value interface the unique id travels through; bytes in,
// bytes out. The worker adapts the coordinator's KV client to it.
struct NcclKv {
  // Stores `value` under `key` (rank 0 only).
  std::function<absl::Status(const std::string& key, const std::string& value)> put;
  // Returns the value under `key`, waiting until it exists or `timeout`
  // passes (then an error, e.g. DEADLINE_EXCEEDED).
  std::function<absl::StatusOr<std::string>(const std::string& key, absl::Duration timeout)> get;
};

struct NcclOptions {
  int rank = 0;
  int world_size = 1;
  int device = 0;  // CUDA ordinal this rank uses
  NcclKv kv;       // required: put on rank 0, get on the others
  // Key prefix in the KV, e.g. "gen7/grad": one communicator per prefix.
  std::string prefix = "tandem";
  // Bounds initialisation (including waiting for the id) and every
  // collective; past it the communicator is aborted and the call fails.
  absl::Duration timeout = absl::Seconds(60);
  // Optional: the compute stream whose enqueued work each collective waits
  // for (e.g. CudaBackend::stream()). nullptr = the caller synchronises.
  cudaStream_t wait_stream = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const NcclOptions& options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "nccl"; }

  absl::Status AllReduce(float* data, int64_t count, ReduceOp op = ReduceOp::kSum) override;
  absl::Status ReduceScatter(const float* input, float* output, int64_t count_per_rank) override;
  absl::Status AllGather(const void* input, void* output, int64_t bytes_per_rank) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;
  absl::Status AllToAll(const void* input, void* output, int64_t bytes_per_rank) override;
  absl::Status Barrier() override;
  // Any thread: the collective being polled (and every later one) fails
  // with ABORTED and the NCCL communicator is aborted (ncclCommAbort) by
  // the thread that owns it, within one poll interval.
  void Abort(const std::string& reason) override;

  // The stream collectives run on (owned).
  cudaStream_t stream() const { return stream_; }

 private:
  NcclCommunicator(const NcclOptions& options);

  // cudaSetDevice, refuses when broken, makes stream_ wait for wait_stream_.
  absl::Status Prepare(const std::string& op);
  // Completes a launch: waits out ncclInProgress, then the stream, polling
  // for async errors until the deadline. Aborts and marks broken on failure.
  absl::Status Complete(ncclResult_t launched, const std::string& op);
  // Polls ncclCommGetAsyncError until it is not ncclInProgress.
  absl::Status WaitNotInProgress(absl::Time deadline, const std::string& op);
  // Aborts the communicator and records `error` as the reason.
  absl::Status Fail(absl::Status error);
  // ABORTED with Abort()'s reason once it was called (checked while polling,
  // so ncclCommAbort runs on the owning thread, never beside a collective).
  absl::Status CheckAbort(const std::string& op);

  const int rank_;
  const int world_size_;
  const int device_;
  const absl::Duration timeout_;
  cudaStream_t const wait_stream_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_event_ = nullptr;  // recorded on wait_stream_
  float* scratch_ = nullptr;           // one float on the device, for Barrier
  absl::Status broken_;
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> abort_reason_claimed_{false};
  std::string abort_reason_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_NCCL_NCCL_COMMUNICATOR_H_
