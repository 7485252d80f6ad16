// Communicator: the gradient hot path's collectives on flat buffers, one
// instance per rank per generation. Implementations: GlooCommunicator
// (CPU, TCP; common/comm/gloo) and NcclCommunicator (GPU; common/comm/nccl).
//
// All calls are collective: every rank of the group must make the same calls
// in the same order with the same counts. Buffers are caller-owned memory of
// the implementation's device (host memory for Gloo, device memory for NCCL).
// Not thread-safe: one thread (the sync engine's communication thread)
// drives a communicator. Every call returns a Status; a peer that dies or
// hangs turns into DEADLINE_EXCEEDED / UNAVAILABLE naming the operation and
// rank after the configured timeout, never a hang or a crash.
//
// Abort() is the one exception to "not thread-safe": any thread may call it
// (the worker's heartbeat thread does, when the coordinator ends the
// generation) while another is inside a collective. The collective in flight
// and every later one then fail at once with ABORTED carrying the reason,
// instead of waiting out the timeout; the instance must then be rebuilt.
#ifndef TANDEM_COMMON_COMM_COMMUNICATOR_H_
#define TANDEM_COMMON_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem {

enum class ReduceOp { kSum, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "gloo" or "nccl".
  virtual std::string backend() const = 0;

  // In place: data[i] = op over ranks of data[i], for i < count.
  virtual absl::Status AllReduce(float* data, int64_t count, ReduceOp op = ReduceOp::kSum) = 0;

  // AllReduce(kSum) that also gives *sum_sq: the sum of squares of the
  // summed result (fp32 squares accumulated in double, so it is non-finite
  // exactly when a summed element is), the same value on every rank, without
  // a second pass over `data`. Only where fuses_sum_of_squares() is true (the
  // default is UNIMPLEMENTED); the summed elements are AllReduce's, bit for
  // bit. The value may differ from another summation order in the last bits.
  virtual bool fuses_sum_of_squares() const { return false; }
  virtual absl::Status AllReduceSumOfSquares(float* data, int64_t count, double* sum_sq) {
    (void)data;
    (void)count;
    (void)sum_sq;
    return absl::UnimplementedError(
        absl::StrCat(backend(), " communicator: AllReduceSumOfSquares is not fused here; "
                                "call AllReduce and sum the squares"));
  }

  // `input` holds world_size() * count_per_rank elements; rank r receives the
  // sum of every rank's r-th slice in `output` (count_per_rank elements).
  virtual absl::Status ReduceScatter(const float* input, float* output,
                                     int64_t count_per_rank) = 0;

  // `output` (world_size() * bytes_per_rank) receives every rank's `input`
  // (bytes_per_rank), in rank order. Byte-typed: any dtype.
  virtual absl::Status AllGather(const void* input, void* output, int64_t bytes_per_rank) = 0;

  // In place: every rank's `data` becomes root's.
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;

  // `input` and `output` hold world_size() blocks of bytes_per_rank; block j
  // of input goes to rank j, block i of output comes from rank i.
  virtual absl::Status AllToAll(const void* input, void* output, int64_t bytes_per_rank) = 0;

  virtual absl::Status Barrier() = 0;

  // Thread-safe, idempotent, never blocks on a peer. The default does
  // nothing: such a transport still fails at its timeout.
  virtual void Abort(const std::string& reason) { (void)reason; }
};

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_COMMUNICATOR_H_
