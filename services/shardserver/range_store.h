// RangeStore: the shard server's core, without gRPC. It holds one
// contiguous range of the flat parameter vector as fp32 master weights with
// the optimizer state for it (common/optim, one optimizer per chunk), sums
// the workers' gradient pushes for a step in place, applies the optimizer
// once every contribution is in, and serves the updated parameters.
//
//   RangeStore store;
//   InitConfig c;  c.generation = 1;  c.step = 0;  c.range = {0, n};
//   c.chunk_elements = 1 << 20;  c.world_size = 4;  c.optimizer = ...;
//   ASSIGN_OR_RETURN(auto init, store.BeginInit(c));
//   RETURN_IF_ERROR(init->Fill(0, params, n));
//   RETURN_IF_ERROR(store.CommitInit(std::move(init)).status());
//   // every worker, for every chunk of the step:
//   ASSIGN_OR_RETURN(PushOutcome o, store.Push(header, grads + lo, hi - lo));
//   RETURN_IF_ERROR(store.WaitForStep(1, /*step=*/1, deadline));
//   RETURN_IF_ERROR(store.ReadParams(1, 1, lo, hi, out));
//
// Steps. After InitShard at step s the store collects step s + 1. A chunk's
// pushes are keyed by (generation, step, chunk, rank): a repeat is
// acknowledged (kDuplicate) and not summed again, so retries are safe.
// Each push carries a weight (1 for a worker's own gradients, K for a node's
// reduce-scattered sum of K workers); a chunk is complete when its weights
// add up to world_size. Only when every chunk of the range is complete is
// the optimizer applied, once, to the whole range (grad_scale / world_size,
// the same average allreduce takes): a worker that pushed part of a step and
// died leaves nothing applied. Then step s + 1 is pullable and s + 2 is
// collected. Only the latest parameters are kept.
//
// Refusals (nothing is summed, nothing applied): a push or pull of another
// generation, or before any InitShard (ABORTED: that generation cannot go
// on here, e.g. after a server restart; workers re-join), of a step
// other than the one being collected (FAILED_PRECONDITION; a repeat of the
// step just applied is a kDuplicate), a range that is not exactly one of the
// chunks or data of the wrong length (INVALID_ARGUMENT naming the chunk
// layout), a bad rank or weight, weights that would exceed world_size, or a
// learning rate / grad_scale that differs from the step's first push
// (INVALID_ARGUMENT).
//
// Int8 delta pulls (InitConfig::pull_int8_chunk > 0, hybrid's
// compress=int8): the store also keeps the reference, the fp32 values the
// workers hold (the parameters sent at init). When a chunk's step is
// applied it encodes delta = master - reference with the int8 codec, adds
// the decoded delta to the reference (codec DecodeAdd, the same kernel the
// workers run, so both end bit-identical) and keeps the block for ReadDelta.
// What rounding dropped is still in master - reference and goes out with
// the next delta: error feedback on the server's side, no drift. A full
// pull with reset_reference sets the reference to the master (the workers
// then hold it: a checkpoint's resync); that step's delta is then gone.
//
// Thread-safety: every method is safe to call from many threads (gRPC's).
// Pushes of different chunks sum in parallel (a mutex per chunk). The push
// that completes a chunk hands its optimizer step to the apply threads
// (apply_threads > 0, apply_queue.h) and returns, so the stream it came on
// reads on while the step runs; with apply_threads 0 the step runs on that
// push's thread before Push returns. WaitForStep
// blocks on a condition variable until the step is applied, the deadline
// passes (DEADLINE_EXCEEDED naming the chunks still incomplete) or a new
// generation replaces this one (ABORTED). Nothing is allocated per step.
#ifndef TANDEM_SERVICES_SHARDSERVER_RANGE_STORE_H_
#define TANDEM_SERVICES_SHARDSERVER_RANGE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/optim/optimizer.h"
#include "common/shard/shard_layout.h"
#include "proto/shardserver.pb.h"
#include "services/shardserver/apply_queue.h"
#include "services/shardserver/shard_metrics.h"

namespace tandem {
namespace shardserver {

struct InitConfig {
  std::string job_id;
  int64_t generation = 0;        // > 0; a new generation replaces the old one
  int64_t step = 0;              // last applied step (>= 0); collects step + 1
  optim::ParamRange range;       // this server's elements of the flat vector
  int64_t chunk_elements = 0;    // chunk cut (ShardLayout::CutRange), >= 1
  int world_size = 0;            // contribution weight per step, >= 1
  v1::OptimizerConfig optimizer; // sgd or adamw (common/optim)
  // false: a step is applied to the whole range once every chunk has every
  // contribution (atomic). true: each chunk is applied as soon as it has
  // every contribution and its pull is served at once, so pulls overlap
  // the other chunks' pushes; a worker lost mid-step then leaves the step
  // partly applied, which the next InitShard discards (state is never
  // kept over a partial step).
  bool apply_per_chunk = false;
  // > 0: int8 delta pulls with one scale per this many values, 256..2048
  // (see the file comment); 0: fp32 pulls only.
  int pull_int8_chunk = 0;
  // Range replication (replica_store.h): host:port of the server keeping a
  // replica of this range ("" = none). When set, every chunk keeps copies
  // of its state from before its last two steps (ReadKept), each applied
  // chunk is handed to the ChunkForwarder before its pulls are answered,
  // and a chunk applies step S + 1 only once the forwarder has marked its
  // step S replicated (MarkReplicated): pulls never wait for the replica,
  // which lags this range by at most one step.
  std::string replica_address;
};

// Sends applied chunks to the replica (replicator.h). Applied is called
// from the apply path (never under the store's locks) and must not block.
class ChunkForwarder {
 public:
  virtual ~ChunkForwarder() = default;
  // Chunk `chunk` of `generation` holds the state after `step` (or was
  // initialised at it).
  virtual void Applied(int64_t generation, int chunk, int64_t step) = 0;
};

// One push: elements [lo, hi) of the gradient for `step`.
struct PushHeader {
  int64_t generation = 0;
  int64_t step = 0;
  int64_t lo = 0;
  int64_t hi = 0;
  int rank = 0;
  int weight = 1;
  double learning_rate = 0;
  double grad_scale = 1;
};

enum class PushOutcome { kSummed, kDuplicate };

struct StoreInfo {
  std::string job_id;
  int64_t generation = 0;  // 0 = never initialised
  int64_t step = 0;        // last applied step
  optim::ParamRange range;
  int64_t chunk_elements = 0;
  int64_t chunks = 0;
  int world_size = 0;
  v1::OptimizerConfig optimizer;
};

struct ChunkSlot;  // one chunk's accumulator and optimizer (range_store.cc)

class RangeStore {
 public:
  // `metrics` may be null; it must outlive the store. apply_threads: see
  // the file comment (the shard server uses 2).
  explicit RangeStore(const ShardMetrics* metrics = nullptr, int apply_threads = 0);
  ~RangeStore();
  RangeStore(const RangeStore&) = delete;
  RangeStore& operator=(const RangeStore&) = delete;

  struct State;  // one generation's range, chunks and optimizers

  // Initial parameters, filled in pieces then committed atomically.
  class PendingInit {
   public:
    ~PendingInit();
    // params[lo, lo + n) of the flat vector; must lie inside the range.
    absl::Status Fill(int64_t lo, const float* data, int64_t n);
    // Optimizer state buffer `name` over [lo, lo + n) (a restored
    // checkpoint). A buffer that is sent must be sent whole; one that is
    // not starts from zeros. INVALID_ARGUMENT for a name the optimizer
    // does not have or a range outside this server's.
    absl::Status FillState(const std::string& name, int64_t lo, const float* data, int64_t n);
    const InitConfig& config() const;

   private:
    friend class RangeStore;
    PendingInit() = default;
    std::shared_ptr<State> state_;
    std::vector<bool> filled_;  // per element of the range
    int64_t filled_elements_ = 0;
    // Per state buffer sent: elements covered.
    std::vector<std::pair<std::string, std::vector<bool>>> state_filled_;
  };

  // INVALID_ARGUMENT for a bad config (named field) or optimizer settings.
  absl::StatusOr<std::unique_ptr<PendingInit>> BeginInit(const InitConfig& config);
  // Replaces the current generation (pulls waiting on it end ABORTED).
  // Returns whether the optimizer state was kept: same range, chunks,
  // optimizer and world, config.step equal to the step applied so far and
  // no state sent with the init; otherwise it is the state sent (FillState)
  // or zeros. INVALID_ARGUMENT when not every element
  // was filled; FAILED_PRECONDITION for a generation older than the current.
  absl::StatusOr<bool> CommitInit(std::unique_ptr<PendingInit> init);

  absl::StatusOr<PushOutcome> Push(const PushHeader& header, const float* data, int64_t n);

  // Returns once `step` is applied in `generation` (see the file comment);
  // with apply_per_chunk and lo < hi, once the chunks of [lo, hi) are.
  absl::Status WaitForStep(int64_t generation, int64_t step, absl::Time deadline,
                           int64_t lo = 0, int64_t hi = 0);
  // Copies params[lo, hi) as of `step` into out; FAILED_PRECONDITION when
  // the latest applied step is not `step`, INVALID_ARGUMENT outside the range.
  // reset_reference (int8 delta pulls only, else INVALID_ARGUMENT): the
  // reference of [lo, hi) becomes these values and the deltas of `step`
  // of the chunks it touches are dropped.
  absl::Status ReadParams(int64_t generation, int64_t step, int64_t lo, int64_t hi, float* out,
                          bool reset_reference = false);
  // The int8 block of chunk [lo, hi)'s delta for `step` into *out (its
  // bytes replaced). INVALID_ARGUMENT without int8 delta pulls or for a
  // range that is not one chunk; FAILED_PRECONDITION when the chunk is not
  // at `step`, or its delta was dropped by a reset.
  absl::Status ReadDelta(int64_t generation, int64_t step, int64_t lo, int64_t hi,
                         std::string* out);
  // The same for optimizer state buffer `name` (INVALID_ARGUMENT when the
  // optimizer has no such buffer).
  absl::Status ReadState(int64_t generation, int64_t step, const std::string& name, int64_t lo,
                         int64_t hi, float* out);

  StoreInfo info() const;

  // Range replication (InitConfig::replica_address). The forwarder is
  // borrowed and set once, before the first InitShard.
  void SetForwarder(ChunkForwarder* forwarder) { forwarder_ = forwarder; }
  // What the replica is sent for chunk `chunk` at the step it is at, into
  // *msg with the layout fields and the optimizer config: the summed
  // gradient of that step (a gradient message: `grad` set, swapped in from
  // the chunk and lent until MarkReplicated, or the next read of the chunk
  // into the same message, swaps it back) unless `full` or the chunk holds
  // no gradient of its step (its InitShard step), else its parameters and
  // optimizer state (copied). *address: where to send it. Returns the step
  // the chunk is at. ABORTED when `generation` is no longer current.
  absl::StatusOr<int64_t> ReadChunkForReplica(int64_t generation, int chunk, bool full,
                                              v1::ReplicaChunk* msg, std::string* address);
  // Returns once the replica acknowledged `step` for every chunk (at once
  // without replication). ABORTED when the generation is not current or is
  // replaced meanwhile, DEADLINE_EXCEEDED naming the replica.
  absl::Status WaitReplicated(int64_t generation, int64_t step, absl::Time deadline);
  // The replica holds chunk `chunk` at `step` (or replication failed and
  // the range must not wait for it): the chunk may apply step + 1.
  // `sent`: the message ReadChunkForReplica filled, whose lent gradient
  // goes back to the chunk (nullptr: nothing to hand back).
  void MarkReplicated(int64_t generation, int chunk, int64_t step,
                      v1::ReplicaChunk* sent = nullptr);
  // Recovery: `name` ("" = parameters) over [lo, hi) as of `step`, from
  // each chunk's live state or the copies kept from before its last two
  // steps.
  // No generation check: the generation that was current when the job
  // lost a server. FAILED_PRECONDITION naming the chunk when neither is
  // at `step` (or nothing is held); INVALID_ARGUMENT outside the range.
  absl::Status ReadKept(int64_t step, const std::string& name, int64_t lo, int64_t hi,
                        float* out) const;
  // Bytes of one chunk's values in the current generation (0: none).
  int64_t chunk_bytes() const;
  // Bytes held for the copies kept from before a step and the gradient
  // kept for the replica.
  int64_t kept_bytes() const;

 private:
  // After `step` was applied to (or initialised in) the chunks [first,
  // last): hands them to the forwarder when this generation replicates.
  void Forward(const State& st, int first, int last, int64_t step);
  absl::StatusOr<std::shared_ptr<State>> Current(int64_t generation, const char* what) const;
  // Push's steps: admit the step (false: a repeat of the step just
  // applied), sum into the chunk's slot, apply when complete.
  enum class SlotSum { kSummed, kComplete, kDuplicate };
  absl::StatusOr<bool> AdmitStep(State& st, const PushHeader& h, const std::string& where);
  absl::StatusOr<SlotSum> SumIntoSlot(State& st, ChunkSlot& slot, const PushHeader& h,
                                      const float* data, int64_t n, const std::string& where);
  // The whole step once every chunk is complete (this push completed one).
  void ApplyStepIfComplete(State& st, int64_t step);
  // apply_per_chunk: chunk `chunk`'s step as soon as it is complete.
  void ApplyChunk(State& st, int chunk, int64_t step);
  // Range replication's lag bound: before chunks [first, last) apply
  // `step`, waits (st.mu held, released while waiting) until their replica
  // acknowledged step - 1. False when the generation was replaced meanwhile
  // (the step is then not applied).
  bool AwaitReplica(State& st, int first, int last, int64_t step);
  // An apply thread's job: chunk j.chunk of j.state completed j.step.
  void RunApply(const ApplyJob& j);

  const ShardMetrics* const metrics_;
  mutable absl::Mutex mu_;
  std::shared_ptr<State> current_ ABSL_GUARDED_BY(mu_);
  ChunkForwarder* forwarder_ = nullptr;
  // Last: its threads call into the members above; the destructor stops it first.
  std::unique_ptr<ApplyQueue> apply_;
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_RANGE_STORE_H_
