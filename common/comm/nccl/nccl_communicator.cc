#include "common/comm/nccl/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace {

absl::StatusCode NcclCode(ncclResult_t r) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclSystemError:
    case ncclRemoteError:
    case ncclUnhandledCudaError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

// The one place an ncclResult_t becomes a Status.
absl::Status NcclError(ncclResult_t r, const std::string& op, int rank, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return absl::Status(NcclCode(r),
                      absl::StrCat("nccl ", op, " on rank ", rank, " failed: ",
                                   ncclGetErrorString(r), " (", static_cast<int>(r), ")",
                                   last != nullptr && *last != '\0' ? absl::StrCat(": ", last)
                                                                    : std::string()));
}

absl::Status CudaError(cudaError_t e, const std::string& op, int rank) {
  const absl::StatusCode code = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
                                        e == cudaErrorInvalidDevice
                                    ? absl::StatusCode::kUnavailable
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat("nccl communicator: ", op, " on rank ", rank,
                                         " failed: CUDA error ", cudaGetErrorName(e), ": ",
                                         cudaGetErrorString(e)));
}

// Polling backs off from spinning to short sleeps: a collective usually
// completes in microseconds to milliseconds; a hung one waits for the timeout.
void Pause(int iteration) {
  if (iteration < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(iteration < 1024 ? 10 : 200));
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(const NcclOptions& options)
    : rank_(options.rank),
      world_size_(options.world_size),
      device_(options.device),
      timeout_(options.timeout),
      wait_stream_(options.wait_stream) {}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclOptions& options) {
  const int rank = options.rank;
  if (options.world_size < 1 || rank < 0 || rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: rank ", rank, " is not in a world of ",
                                                   options.world_size,
                                                   " (need 0 <= rank < world_size)"));
  }
  if (rank == 0 ? !options.kv.put : !options.kv.get) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl: rank ", rank, " needs the KV's ", rank == 0 ? "put" : "get",
        " function to exchange the NCCL unique id"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("nccl: the timeout must be positive");
  }
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    return CudaError(e, "cudaGetDeviceCount (is there a GPU and a driver?)", rank);
  }
  if (options.device < 0 || options.device >= devices) {
    return absl::UnavailableError(absl::StrCat("nccl: rank ", rank, " asked for CUDA device ",
                                               options.device, " but ", devices,
                                               " device(s) are visible"));
  }
  const absl::Time deadline = absl::Now() + options.timeout;

  // The unique id: made by rank 0, read by the others through the KV.
  const std::string key = absl::StrCat(options.prefix, "/nccl_unique_id");
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return NcclError(r, "ncclGetUniqueId", rank, nullptr);
    }
    RETURN_IF_ERROR(options.kv.put(key, std::string(id.internal, sizeof(id.internal))));
  } else {
    absl::StatusOr<std::string> bytes = options.kv.get(key, options.timeout);
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat("nccl: rank ", rank, " could not read the unique id at '",
                                       key, "': ", bytes.status().message()));
    }
    if (bytes->size() != sizeof(id.internal)) {
      return absl::InvalidArgumentError(absl::StrCat("nccl: the unique id at '", key, "' has ",
                                                     bytes->size(), " bytes, expected ",
                                                     sizeof(id.internal)));
    }
    std::memcpy(id.internal, bytes->data(), sizeof(id.internal));
  }

  // From here the destructor releases whatever was created.
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(options));
  if (cudaError_t e = cudaSetDevice(options.device); e != cudaSuccess) {
    return CudaError(e, "cudaSetDevice", rank);
  }
  if (cudaError_t e = cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError(e, "cudaStreamCreate", rank);
  }
  if (cudaError_t e = cudaEventCreateWithFlags(&c->ready_event_, cudaEventDisableTiming);
      e != cudaSuccess) {
    return CudaError(e, "cudaEventCreate", rank);
  }
  if (cudaError_t e = cudaMalloc(&c->scratch_, sizeof(float)); e != cudaSuccess) {
    return CudaError(e, "cudaMalloc of the barrier scratch", rank);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns; we poll with a deadline
  ncclResult_t r = ncclCommInitRankConfig(&c->comm_, options.world_size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    absl::Status s = NcclError(r, "ncclCommInitRankConfig", rank, c->comm_);
    return c->Fail(s);
  }
  const std::string op = absl::StrCat("init of a ", options.world_size, "-rank communicator");
  RETURN_IF_ERROR(c->WaitNotInProgress(deadline, op));
  return c;
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (comm_ != nullptr) {
    // Graceful: flush, then destroy; abort if a peer is gone (WaitNotInProgress
    // aborts and clears comm_ when finalising fails or times out).
    const ncclResult_t r = ncclCommFinalize(comm_);
    if ((r == ncclSuccess || r == ncclInProgress) &&
        WaitNotInProgress(absl::Now() + timeout_, "finalize").ok()) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    }
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (ready_event_ != nullptr) cudaEventDestroy(ready_event_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status NcclCommunicator::Fail(absl::Status error) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  broken_ = error;
  return error;
}

void NcclCommunicator::Abort(const std::string& reason) {
  bool expected = false;
  if (!abort_reason_claimed_.compare_exchange_strong(expected, true)) return;
  abort_reason_ = reason.empty() ? "aborted by the caller" : reason;
  abort_requested_.store(true, std::memory_order_release);
}

absl::Status NcclCommunicator::CheckAbort(const std::string& op) {
  if (!abort_requested_.load(std::memory_order_acquire)) return absl::OkStatus();
  return Fail(absl::AbortedError(
      absl::StrCat("nccl ", op, " on rank ", rank_, " aborted: ", abort_reason_)));
}

absl::Status NcclCommunicator::WaitNotInProgress(absl::Time deadline, const std::string& op) {
  for (int i = 0;; ++i) {
    if (comm_ != nullptr) RETURN_IF_ERROR(CheckAbort(op));
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm_, &state); r != ncclSuccess) {
      return Fail(NcclError(r, absl::StrCat(op, " (ncclCommGetAsyncError)"), rank_, comm_));
    }
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return Fail(NcclError(state, op, rank_, comm_));
    if (absl::Now() > deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "nccl ", op, " on rank ", rank_, " timed out after ", absl::FormatDuration(timeout_),
          " (a peer is missing or stuck); communicator aborted")));
    }
    Pause(i);
  }
}

absl::Status NcclCommunicator::Prepare(const std::string& op) {
  if (broken_.ok() && abort_requested_.load(std::memory_order_acquire)) {
    return CheckAbort(op);
  }
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nccl ", op, " on rank ", rank_, ": the communicator was aborted after an earlier error (",
        broken_.message(), "); create a new one"));
  }
  if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
    return CudaError(e, absl::StrCat(op, ": cudaSetDevice"), rank_);
  }
  if (wait_stream_ != nullptr) {
    if (cudaError_t e = cudaEventRecord(ready_event_, wait_stream_); e != cudaSuccess) {
      return CudaError(e, absl::StrCat(op, ": cudaEventRecord on the compute stream"), rank_);
    }
    if (cudaError_t e = cudaStreamWaitEvent(stream_, ready_event_, 0); e != cudaSuccess) {
      return CudaError(e, absl::StrCat(op, ": cudaStreamWaitEvent"), rank_);
    }
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Complete(ncclResult_t launched, const std::string& op) {
  const absl::Time deadline = absl::Now() + timeout_;
  if (launched != ncclSuccess && launched != ncclInProgress) {
    return Fail(NcclError(launched, op, rank_, comm_));
  }
  if (launched == ncclInProgress) RETURN_IF_ERROR(WaitNotInProgress(deadline, op));
  for (int i = 0;; ++i) {
    const cudaError_t q = cudaStreamQuery(stream_);
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) {
      return Fail(CudaError(q, absl::StrCat(op, ": cudaStreamQuery"), rank_));
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      return Fail(NcclError(state, op, rank_, comm_));
    }
    RETURN_IF_ERROR(CheckAbort(op));
    if (absl::Now() > deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "nccl ", op, " on rank ", rank_, " timed out after ", absl::FormatDuration(timeout_),
          " (a peer is missing or stuck); communicator aborted")));
    }
    Pause(i);
  }
}

absl::Status NcclCommunicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  if (count == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("allreduce of ", count, " floats");
  RETURN_IF_ERROR(Prepare(name));
  return Complete(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32,
                                op == ReduceOp::kSum ? ncclSum : ncclMax, comm_, stream_),
                  name);
}

absl::Status NcclCommunicator::ReduceScatter(const float* input, float* output,
                                             int64_t count_per_rank) {
  if (count_per_rank == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("reduce-scatter of ", count_per_rank, " floats per rank");
  RETURN_IF_ERROR(Prepare(name));
  return Complete(ncclReduceScatter(input, output, static_cast<size_t>(count_per_rank),
                                    ncclFloat32, ncclSum, comm_, stream_),
                  name);
}

absl::Status NcclCommunicator::AllGather(const void* input, void* output,
                                         int64_t bytes_per_rank) {
  if (bytes_per_rank == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("allgather of ", bytes_per_rank, " bytes per rank");
  RETURN_IF_ERROR(Prepare(name));
  return Complete(ncclAllGather(input, output, static_cast<size_t>(bytes_per_rank), ncclUint8,
                                comm_, stream_),
                  name);
}

absl::Status NcclCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("nccl broadcast root ", root,
                                                   " is not a rank of ", world_size_));
  }
  if (bytes == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("broadcast of ", bytes, " bytes from ", root);
  RETURN_IF_ERROR(Prepare(name));
  return Complete(
      ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, comm_, stream_),
      name);
}

absl::Status NcclCommunicator::AllToAll(const void* input, void* output, int64_t bytes_per_rank) {
  if (bytes_per_rank == 0) return absl::OkStatus();
  const std::string name = absl::StrCat("all-to-all of ", bytes_per_rank, " bytes per rank");
  RETURN_IF_ERROR(Prepare(name));
  // Grouped send/recv (NCCL >= 2.7) rather than ncclAlltoAll (2.28+), so the
  // binary also runs against the older NCCL a GPU machine may provide.
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const size_t n = static_cast<size_t>(bytes_per_rank);
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; peer < world_size_ && (r == ncclSuccess || r == ncclInProgress); ++peer) {
    r = ncclSend(in + peer * n, n, ncclUint8, peer, comm_, stream_);
    if (r == ncclSuccess || r == ncclInProgress) {
      r = ncclRecv(out + peer * n, n, ncclUint8, peer, comm_, stream_);
    }
  }
  const ncclResult_t end = ncclGroupEnd();
  return Complete(r == ncclSuccess || r == ncclInProgress ? end : r, name);
}

absl::Status NcclCommunicator::Barrier() {
  RETURN_IF_ERROR(Prepare("barrier"));
  return Complete(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_),
                  "barrier");
}

}  // namespace tandem
