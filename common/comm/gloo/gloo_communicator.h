// GlooCommunicator: Communicator over Gloo's TCP transport, for CPU workers.
//
//   gloo::rendezvous::HashStore store;           // or the coordinator's KV store
//   GlooOptions options{.rank = r, .world_size = w, .store = &store};
//   ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(options));
//   RETURN_IF_ERROR(comm->AllReduce(grads, n));
//
// Create() connects a full mesh through `store` (keys under `prefix`, so one
// store can serve several generations). The store is borrowed: it must
// outlive Create(); afterwards only the TCP pairs are used. Not thread-safe
// (see Communicator). Gloo throws on I/O errors and timeouts; every call here
// catches and returns a Status naming the operation and this rank. The first
// Create() sets SIGPIPE to ignored for the process: Gloo's sends do not use
// MSG_NOSIGNAL, and a dead peer must be an error, not a silent death.
// Abort() (any thread) puts an exception on every TCP pair of the mesh, as
// Gloo itself does when a socket fails: the collective in flight throws at
// once and is returned as ABORTED with the reason; so is every later call.
#ifndef TANDEM_COMMON_COMM_GLOO_GLOO_COMMUNICATOR_H_
#define TANDEM_COMMON_COMM_GLOO_GLOO_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/comm/communicator.h"
#include "gloo/context.h"
#include "gloo/rendezvous/store.h"

namespace tandem {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  gloo::rendezvous::Store* store = nullptr;  // borrowed, required
  // Key prefix in the store, e.g. "gen7/grad": one mesh per prefix.
  std::string prefix = "tandem";
  // Address peers connect to; 127.0.0.1 for a local cluster.
  std::string hostname = "127.0.0.1";
  // A collective (or the connect) that takes longer fails with
  // DEADLINE_EXCEEDED naming the operation: how a dead peer is detected.
  absl::Duration timeout = absl::Seconds(60);
};

class GlooCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(const GlooOptions& options);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "gloo"; }

  absl::Status AllReduce(float* data, int64_t count, ReduceOp op) override;
  absl::Status ReduceScatter(const float* input, float* output, int64_t count_per_rank) override;
  absl::Status AllGather(const void* input, void* output, int64_t bytes_per_rank) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;
  absl::Status AllToAll(const void* input, void* output, int64_t bytes_per_rank) override;
  absl::Status Barrier() override;
  void Abort(const std::string& reason) override;

 private:
  GlooCommunicator(std::shared_ptr<gloo::Context> context, int rank, int world_size,
                   absl::Duration timeout);

  // Makes Options on the context, lets `fill` set its buffers, sets tag and
  // timeout, runs `run(options)`, and turns Gloo's exceptions into a Status
  // naming describe() (only evaluated on error: no allocation per call).
  template <typename Options, typename Fill, typename Run, typename Describe>
  absl::Status Collective(Fill fill, Run run, Describe describe);

  // Next collective tag; ranks issue the same sequence so tags agree.
  uint32_t NextTag() { return next_tag_++; }

  std::shared_ptr<gloo::Context> context_;
  // Each peer's address as Gloo's errors print it (peer_addresses.h).
  std::vector<std::string> peers_;
  int rank_;
  int world_size_;
  absl::Duration timeout_;
  uint32_t next_tag_ = 1;
  // Set by Abort() (any thread); the reason is written once, before the flag.
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> abort_reason_claimed_{false};
  std::string abort_reason_;
  // ReduceScatter's pipelined ring over acc (N blocks of `count`); throws
  // gloo's exceptions.
  void RingReduceScatter(float* acc, float* const incoming[2], int64_t count);
  // ReduceScatter: pipelined in segments of this many floats (512 KiB).
  static constexpr int64_t kReduceScatterSegmentFloats = 128 * 1024;
  // ReduceScatter scratch (the accumulator and two incoming blocks), grown
  // once to the largest input seen.
  std::vector<float> scratch_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_GLOO_GLOO_COMMUNICATOR_H_
