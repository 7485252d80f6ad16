// Checkpointer: the training state that survives generations, and how it
// reaches disk and every rank.
//
// Restore: from the ranks' memory where it can (memory_state.h for
// replicated strategies, server_recovery.h for ps / hybrid with replicated
// shard servers); otherwise rank 0 decides the state — the last committed checkpoint the
// join named, or the seeded initialisation when there is none — and
// broadcasts it over the control mesh: parameters, the optimizer state
// (each whole buffer in pieces; every rank keeps the part in its
// owned_range(), so a checkpoint of any strategy at any world size reshards
// into this one), step and data position. Ranks that diverged in a failed
// step are made identical again. Rank 0 reads the checkpoint (a single file,
// or a manifest and every shard it names) and checks all of it — model,
// size, optimizer, cursor — before anything is overwritten.
//
// The model's registered buffers (BatchNorm running statistics of a
// torchscript: module) are rank 0's: written in the shard at 0 (blob
// "model_buffers") and broadcast from rank 0 on every Restore, so every
// generation starts with one copy and a resume is bit-identical.
//
// Write (collective: every rank calls it at the same step): each distinct
// owned range is one shard, written by the lowest rank owning it, with its
// parameters, its optimizer state and the writer's extra strategy state
// (blobs "sync/<name>"); the shard at 0 also holds the data cursor and the
// model spec. One shard (allreduce) is written as <dir>/step-<N>.tckpt
// and committed as is; several (ZeRO) as
// <dir>/step-<N>.shard-<r>-of-<W>.tckpt, then, once every rank reports its
// shard on disk, rank 0 writes <dir>/step-<N>.manifest last and commits
// that. Sharded checkpoints written by several nodes need a checkpoint dir
// all of them share (rank 0 reads every shard on restore). ps / hybrid
// (sync::ServerSideCheckpoint, once the servers hold the generation): the
// shard servers write one shard each (<dir>/step-<N>.shard-<s>-of-<S>.tckpt,
// server s, with rank 0's blobs in the one at 0) and rank 0 the manifest;
// no rank writes parameters and the servers' state is not fetched.
//
//   Checkpointer ck(options, backend, model, client);
//   ASSIGN_OR_RETURN(bool resumed, ck.Restore(g, &state));
//   ...
//   RETURN_IF_ERROR(ck.Write(g, &state));
//
// Extra strategy state is rank 0's: on restore rank 0 gets it back when the
// checkpoint has it at the same size (else it starts at zero, logged),
// other ranks start it at zero. Restore needs, transiently, the whole
// vector's state on rank 0 and one 4 MiB piece on the other ranks.
// Thread-compatible (the trainer thread). Borrows backend, model and
// client. Failure: rank 0's read or restore error reaches every rank as
// INTERNAL with rank 0's message (a configuration problem, not a
// membership change); write and commit errors pass through. A committed
// checkpoint rank 0 cannot read (checksum, truncation, missing file) is
// skipped for the previous commit the join names (earlier_checkpoints),
// with a warning naming it; when none is readable, the error names each.
#ifndef TANDEM_SERVICES_WORKER_CHECKPOINTER_H_
#define TANDEM_SERVICES_WORKER_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/data/sampler.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "common/metrics/metrics.h"
#include "proto/dataserver.pb.h"
#include "services/worker/background_checkpoint.h"
#include "services/worker/coordinator_client.h"
#include "services/worker/generation.h"
#include "services/worker/host_staging.h"
#include "services/worker/memory_state.h"
#include "services/worker/pinned_staging.h"
#include "common/sync/remote/server_side_checkpoint.h"
#include "services/worker/server_recovery.h"

namespace tandem {
namespace worker {

// Where training stands; what a checkpoint records.
struct TrainingState {
  int64_t step = 0;               // optimizer steps applied
  data::Cursor cursor;            // the next batch of this world
  // Samples of the epoch's permutation consumed: recorded at every step
  // boundary and in checkpoints; a generation starts cutting its global
  // batches (of any world or batch size) from here.
  int64_t samples_in_epoch = 0;
  int64_t checkpoint_step = -1;   // step of the last checkpoint written or loaded
  // StepPrecision's state (fp16 loss scale; empty otherwise), saved by rank
  // 0 and restored on every rank.
  std::string loss_scaler;
};

struct CheckpointerOptions {
  std::string dir;            // empty: never write
  // WritePeriodic in the background for every layout: one file written by
  // rank 0 (allreduce, hier, compressed), one shard per rank (zero1/2/3),
  // the shard servers' ranges (ps, hybrid). --background_checkpoint.
  bool background = false;
  checkpoint::WriteOptions write_options;  // test hook: fault injection
  // Restore continues from the ranks' in-memory state where it can
  // (memory_state.h); --recover_from_memory.
  bool recover_from_memory = false;
  // Sharded strategies' peer replicas (every 0: off); --replica_every.
  PeerReplicaOptions replica{0, false, {}};
  std::string model_text;     // the --model string, stored in the file
  uint64_t fingerprint = 0;   // checkpoint::ModelFingerprint of the model
  uint64_t seed = 1;          // initialisation when there is no checkpoint
  int batch_size = 64;        // per worker, for the samples-in-epoch record
};

class Checkpointer {
 public:
  Checkpointer(CheckpointerOptions options, kernels::Backend* backend, nn::Model* model,
               CoordinatorClient* client)
      : o_(std::move(options)),
        backend_(backend),
        model_(model),
        client_(client),
        memory_(o_.recover_from_memory, backend, model, o_.replica),
        servers_(o_.recover_from_memory) {}

  // True when it resumed from a checkpoint or from memory (false: the
  // seeded start). From memory first (MemoryState::TryRestore, every
  // rank), else the disk as described above.
  absl::StatusOr<bool> Restore(Generation& g, TrainingState* state);
  // What the last Restore's agreement decided: from memory (`restored`),
  // and the newest step any rank had reached (steps redone = reached - step).
  const MemoryRecovery& last_recovery() const { return recovery_; }
  // At the end of a generation, before it is destroyed (the trainer's
  // re-join path): keeps this rank's state for the next Restore.
  void Retain(Generation& g, const TrainingState& state) {
    memory_.Retain(g, state.step, state.cursor.epoch, state.samples_in_epoch);
  }
  // After every completed step: its data position, for a recovery from the
  // shard servers' memory (server_recovery.h).
  void NoteStep(const TrainingState& state) {
    servers_.Note(state.step, state.cursor.epoch, state.samples_in_epoch);
  }
  // After every applied step: the peer replica of a sharded strategy's
  // state every --replica_every steps (memory_state.h).
  absl::Status Replicate(Generation& g, const TrainingState& state) {
    return memory_.Replicate(g, state.step, state.cursor.epoch, state.samples_in_epoch);
  }
  int64_t replica_bytes() const { return memory_.replica_bytes(); }
  // Rank 0, after Restore: the file it loaded ("" for none), and one line
  // per committed checkpoint it skipped as unreadable (taken: cleared).
  const std::string& restored_path() const { return restored_path_; }
  std::vector<std::string> TakeWarnings() { return std::move(warnings_); }
  // Every rank writes its shard, rank 0 the manifest and the commit; a
  // no-op when `dir` is empty or the step is already on disk. Returns the
  // committed path on rank 0, "" elsewhere. A rank that could not write its
  // shard makes every rank return an error naming it; nothing is committed.
  // Synchronous (the end of a run, a STOP): first waits for a background
  // write in flight.
  absl::StatusOr<std::string> Write(Generation& g, TrainingState* state);
  // A --checkpoint_every checkpoint (collective, as Write). With `background`
  // and the single-file layout, rank 0 copies the state into its snapshot
  // (waiting first if the previous one is still being written) and returns
  // "" at once: the file is written and committed by the background writer
  // (background_checkpoint.h); a failure there is a warning and a metric,
  // never an error here. Sharded (zero1/2/3): every writing rank does the
  // same with its shard and commits it as one of the step's shards; rank 0
  // writes the manifest after its shard; the coordinator records the step
  // only once every shard has been committed, so a rank that cannot write
  // leaves the previous checkpoint. ps / hybrid: the shard servers copy
  // their ranges into their own snapshots at the step and write them from
  // rank 0's background writer, which then writes the manifest and commits.
  // Without `background`, as Write.
  absl::StatusOr<std::string> WritePeriodic(Generation& g, TrainingState* state);
  // Registers the checkpoint metrics (once the process's rank label is set).
  absl::Status EnableMetrics(Metrics* metrics);

 private:
  struct WritePlan;  // who writes which shard, and what is committed

  // Device backends: a host copy of the parameters, staged in staging_.
  absl::StatusOr<float*> HostParams();

  // Restore's steps. Rank 0: the initial state, or the newest committed
  // checkpoint that reads (header: step, epoch, samples; *c the whole
  // vector). Then every rank: parameters, optimizer state resharded to the
  // owned range, the strategy's extra state, the loss-scaler record.
  absl::Status LoadOnRank0(Generation& g, std::string* path, int64_t header[4],
                           std::optional<checkpoint::Checkpoint>* c);
  absl::StatusOr<checkpoint::Checkpoint> ReadNewestReadable(Generation& g, std::string* path,
                                                            v1::DataCursor* dc);
  absl::Status BroadcastParams(Generation& g);
  absl::Status ReshardOptimizerState(Generation& g, checkpoint::Checkpoint* c,
                                     bool from_checkpoint);
  void LoadExtraState(Generation& g, const checkpoint::Checkpoint* c, const std::string& path);
  // `blob` (on `root`; null: none) to every rank's *out.
  absl::Status BroadcastLossScaler(Generation& g, const std::string* blob, int root,
                                   std::string* out);
  absl::Status RestoreFromMemory(Generation& g, TrainingState* state);

  // Write's steps: plan the shards, write mine, agree every rank wrote,
  // rank 0 commits (shard manifest, or the shard servers save).
  absl::StatusOr<WritePlan> PlanWrite(Generation& g, const TrainingState& state);
  absl::StatusOr<std::string> WritePlanned(Generation& g, TrainingState* state,
                                           const WritePlan& plan);
  // Builds this rank's shard as a view over the live state and hands it to
  // `use` (write it, or copy it into the background snapshot).
  absl::Status WithShardView(
      Generation& g, const TrainingState& state, const WritePlan& plan,
      const std::function<absl::Status(const checkpoint::CheckpointView&)>& use);
  absl::Status WriteShard(Generation& g, const TrainingState& state, const WritePlan& plan);
  absl::Status AllWrote(Generation& g, const absl::Status& wrote, int64_t step);
  checkpoint::Manifest ManifestHeader(Generation& g, int64_t step) const;
  v1::CheckpointRecord Record(Generation& g, int64_t step, const v1::DataCursor& cursor,
                              const std::string& committed_path) const;
  absl::Status CommitAt(Generation& g, int64_t step, const v1::DataCursor& cursor,
                        const std::string& committed_path);
  absl::Status CommitShards(Generation& g, const TrainingState& state, const WritePlan& plan);
  // The manifest naming every writer's shard file of `step`.
  checkpoint::Manifest ShardManifest(Generation& g, int64_t step, const WritePlan& plan) const;
  // This rank's shard file of `step` (several shards).
  std::string ShardPath(Generation& g, int64_t step) const;
  absl::Status CommitOnServers(Generation& g, const TrainingState& state, const WritePlan& plan);
  // What the shard servers need to save `state` (ps / hybrid).
  sync::ServerSaveRequest ServerRequest(Generation& g, const TrainingState& state,
                                        const WritePlan& plan);
  // The background writer, made at first use; CaptureShard waits for its
  // previous write, then copies this rank's shard into its snapshot.
  BackgroundCheckpointWriter& Writer();
  absl::Status CaptureShard(Generation& g, const TrainingState& state, const WritePlan& plan);
  absl::StatusOr<std::string> WriteFileInBackground(Generation& g, TrainingState* state,
                                                    const WritePlan& plan);
  absl::StatusOr<std::string> WriteShardsInBackground(Generation& g, TrainingState* state,
                                                      const WritePlan& plan);
  absl::StatusOr<std::string> WriteOnServersInBackground(Generation& g, TrainingState* state,
                                                         const WritePlan& plan);

  const CheckpointerOptions o_;
  kernels::Backend* const backend_;
  nn::Model* const model_;
  CoordinatorClient* const client_;
  // Device backends: where HostParams stages the parameters (pinned when a
  // CUDA device is usable; host_staging.h), made at first use.
  std::unique_ptr<HostStaging> staging_;
  std::string restored_path_;
  std::vector<std::string> warnings_;
  std::unique_ptr<CheckpointMetrics> metrics_;       // null until EnableMetrics
  MemoryState memory_;
  ServerRecovery servers_;
  MemoryRecovery recovery_;
  // Last: its destructor waits for the write in flight, which uses client_.
  std::unique_ptr<BackgroundCheckpointWriter> bg_;  // made at the first background write
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_CHECKPOINTER_H_
