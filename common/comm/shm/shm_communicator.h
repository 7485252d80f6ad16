// ShmCommunicator: Communicator over POSIX shared memory, for ranks that are
// processes (or threads) on one host. Loopback TCP (Gloo) moves ~0.5 GB/s
// here; a shared segment moves at memcpy speed.
//
//   ShmOptions o;
//   o.rank = r;  o.world_size = w;  o.store = &store;  // coordinator KV store
//   o.prefix = "job/gen7/grad";
//   ASSIGN_OR_RETURN(auto comm, ShmCommunicator::Create(o));
//   RETURN_IF_ERROR(comm->AllReduce(grads, n));
//
// Create(): rank 0 creates a segment (shm_open, name derived from `prefix`,
// its pid and a random suffix), sizes it with posix_fallocate (so a full
// /dev/shm is an error, not a SIGBUS later) and publishes the name in
// `store` under "<prefix>/shm_name"; the others open and map it; once every
// rank has mapped it (a barrier in the segment) rank 0 unlinks the name, so
// the memory is freed when the last rank unmaps, even after crashes.
//
// Segment: a control page (barrier words, abort word), then world_size
// staging slots and one result area of `chunk_bytes` each. Collectives run
// in chunks: each rank copies its piece into its slot, barrier, each rank
// reduces (or copies) its 1/N share across the slots, barrier, each rank
// copies out. (AllReduce stages and copies out only the other ranks'
// shares: a rank reads its own share from its input and writes the sum
// back there itself, with the same rank-order sum.) The barrier is a generation counter in shared memory: spin
// briefly, then futex(FUTEX_WAIT) (non-private: cross-process) in slices
// bounded by the operation's deadline; the last arrival FUTEX_WAKEs sleepers.
//
// Thread-safety: not thread-safe (see Communicator); one thread per instance.
// Ownership: the store is borrowed and only used inside Create(); the
// instance owns its mapping (unmapped in the destructor). Nothing is
// allocated per call. Failure: each collective has a deadline of `timeout`;
// a peer that stops calling turns into DEADLINE_EXCEEDED naming the
// operation and this rank. A peer process that exits or is killed is noticed
// after ~0.1 s of waiting (its pid, recorded in the segment, is gone or a
// zombie; only peers in this pid namespace) and turns into UNAVAILABLE
// naming it (PeerExitedText, common/comm/peer_exited.h); the peers' errors
// (ABORTED) carry the same text. The rank that times out marks the segment
// aborted and wakes the others, whose waits then fail with ABORTED at once;
// after any failure the instance is unusable (FAILED_PRECONDITION) and must be
// rebuilt, as after a failed Gloo collective. Abort() (any thread) marks
// the segment aborted and wakes every sleeper: the waits in flight here and
// on the peers fail with ABORTED within microseconds, not at the timeout.
#ifndef TANDEM_COMMON_COMM_SHM_SHM_COMMUNICATOR_H_
#define TANDEM_COMMON_COMM_SHM_SHM_COMMUNICATOR_H_

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/comm/communicator.h"
#include "gloo/rendezvous/store.h"

namespace tandem {

struct ShmOptions {
  int rank = 0;
  int world_size = 1;
  gloo::rendezvous::Store* store = nullptr;  // borrowed, required, used by Create() only
  // Key prefix in the store and the readable part of the segment's name, e.g.
  // "job/gen7/grad": one segment per prefix. Characters other than
  // [A-Za-z0-9._-] become '_' in the name.
  std::string prefix = "tandem";
  // Staging bytes per rank (the segment holds world_size + 1 of them). Larger
  // chunks mean fewer barriers per large collective. Rounded up to 4 KiB.
  int64_t chunk_bytes = int64_t{4} << 20;
  // A collective (or Create) that takes longer fails with DEADLINE_EXCEEDED.
  absl::Duration timeout = absl::Seconds(60);
  // Busy-wait iterations before sleeping on the futex; -1: automatic (a few
  // thousand when every rank can have a core, a handful when ranks outnumber
  // the online CPUs, where spinning would steal the core a peer needs).
  int spin_iterations = -1;
};

class ShmCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<ShmCommunicator>> Create(const ShmOptions& options);
  ~ShmCommunicator() override;
  ShmCommunicator(const ShmCommunicator&) = delete;
  ShmCommunicator& operator=(const ShmCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "shm"; }

  absl::Status AllReduce(float* data, int64_t count, ReduceOp op = ReduceOp::kSum) override;
  // The sum of squares comes from the reduce pass (each rank squares the
  // share it sums, from L1) and one double per rank in the segment.
  bool fuses_sum_of_squares() const override { return true; }
  absl::Status AllReduceSumOfSquares(float* data, int64_t count, double* sum_sq) override;
  absl::Status ReduceScatter(const float* input, float* output, int64_t count_per_rank) override;
  absl::Status AllGather(const void* input, void* output, int64_t bytes_per_rank) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;
  absl::Status AllToAll(const void* input, void* output, int64_t bytes_per_rank) override;
  absl::Status Barrier() override;
  void Abort(const std::string& reason) override;

  // The ZeRO strategies' collectives on one node (shm_pieces.cc): the two
  // halves of AllReduce over unequal contiguous pieces of one buffer, with
  // no packing. `bounds` holds world_size() + 1 non-decreasing offsets into
  // `data`; rank j's piece is [bounds[j], bounds[j + 1]).
  //
  // ReduceScatterPieces: `output` (this rank's piece size) receives the
  // sum over ranks of every rank's copy of this rank's piece, summed in
  // rank order like AllReduce (so bit for bit its result). Only the other
  // ranks' pieces are staged; `output` may alias this rank's piece.
  absl::Status ReduceScatterPieces(const float* data, const int64_t* bounds, float* output);
  // AllGatherPieces, in place: every rank's piece of `data` is copied to
  // every other rank's `data` at the same offsets.
  absl::Status AllGatherPieces(float* data, const int64_t* bounds);

  // The segment's name (unlinked once every rank has mapped it), for logs.
  const std::string& segment_name() const { return name_; }

 private:
  struct Control;
  // Writes `reason` into the segment for the peers' errors, unless a
  // reason is there already.
  void PublishReason(const std::string& reason);
  struct RankInfo;
  ShmCommunicator(int rank, int world_size, const ShmOptions& options);

  // Create's steps after the segment is open (fd, closed here): map it;
  // rank 0 initialises the control block and publishes the name under
  // `key`, the others check it was made for their group.
  absl::Status MapAndPublish(int fd, const ShmOptions& options, size_t control_bytes,
                             const std::string& key);
  // Peers in other processes of this pid namespace, watched while waiting.
  void WatchLocalPeers();

  // AllReduce, and with `sum_sq` non-null AllReduceSumOfSquares (kSum).
  absl::Status AllReduceChunks(float* data, int64_t count, ReduceOp op, double* sum_sq);

  // Waits for every rank to arrive. `op` names the operation in errors (only
  // formatted on failure). On failure marks this instance broken.
  absl::Status WaitAll(absl::Time deadline, absl::string_view op);
  // FAILED_PRECONDITION when an earlier call failed.
  absl::Status CheckUsable(absl::string_view op) const;

  char* slot(int r) const { return data_ + static_cast<size_t>(r) * chunk_bytes_; }
  char* result() const { return slot(world_size_); }

  int rank_;
  int world_size_;
  int64_t chunk_bytes_;
  absl::Duration timeout_;
  int spin_iterations_;
  std::string name_;
  void* base_ = nullptr;   // the mapping
  size_t map_bytes_ = 0;
  Control* control_ = nullptr;
  RankInfo* ranks_ = nullptr;       // world_size entries after Control
  std::vector<int> watch_;          // peers in other processes of our pid namespace
  std::vector<const float*> srcs_;  // per-call slot pointers, sized once
  char* data_ = nullptr;   // slots then result
  bool broken_ = false;
  std::string broken_reason_;
  // Set by Abort() (any thread); the reason is written once, before the flag.
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> abort_reason_claimed_{false};
  std::string abort_reason_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_SHM_SHM_COMMUNICATOR_H_
