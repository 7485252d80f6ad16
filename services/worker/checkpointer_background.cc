// Checkpointer's --checkpoint_every path (checkpointer.h, WritePeriodic):
// with --background_checkpoint each layout is copied at the step boundary
// and written by the background writer (background_checkpoint.h) while
// training goes on — the single file by rank 0, a sharded checkpoint's
// shards by their ranks (each commits its own; the coordinator records the
// step once all are in), ps / hybrid by the shard servers
// (checkpointer_servers.cc).
#include <string>
#include <utility>

#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/trace/trace.h"
#include "services/worker/checkpointer.h"
#include "services/worker/checkpointer_internal.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::string> Checkpointer::WritePeriodic(Generation& g, TrainingState* state) {
  if (o_.dir.empty()) return std::string();
  if (state->step == state->checkpoint_step) return std::string();  // already on disk
  trace::Span span("checkpoint write", "io", -1, state->step);
  ASSIGN_OR_RETURN(WritePlan plan, PlanWrite(g, *state));
  // Every rank takes the same branch (the plan is all-gathered).
  if (!o_.background) return WritePlanned(g, state, plan);
  if (plan.on_servers != nullptr) return WriteOnServersInBackground(g, state, plan);
  RETURN_IF_ERROR(g.sync->SyncStateToHost());  // collective for some strategies
  return plan.single ? WriteFileInBackground(g, state, plan)
                     : WriteShardsInBackground(g, state, plan);
}

absl::Status Checkpointer::CaptureShard(Generation& g, const TrainingState& state,
                                        const WritePlan& plan) {
  // A directory this rank cannot create fails the write on the writer
  // thread (a warning and tandem_checkpoint_failures_total, the previous
  // checkpoint stays), as a full disk would: never the training step.
  if (absl::Status s = MakeDirectories(o_.dir); !s.ok()) {
    LOG(WARNING) << "checkpoint directory: " << s.message();
  }
  CheckpointSnapshot* snapshot = Writer().Acquire();  // waits for the previous write
  return WithShardView(g, state, plan, [&](const checkpoint::CheckpointView& v) {
    snapshot->Capture(v);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> Checkpointer::WriteFileInBackground(Generation& g,
                                                               TrainingState* state,
                                                               const WritePlan& plan) {
  if (g.rank() != 0) return std::string();
  RETURN_IF_ERROR(CaptureShard(g, *state, plan));
  bg_->Submit(plan.single_path, Record(g, state->step, plan.cursor, plan.single_path),
              {g.join.generation()});
  return std::string();
}

// zero1/2/3: every writing rank copies its shard and its writer thread
// writes and commits it as shard i of the plan's writers; rank 0 (always
// the writer of the range at 0) writes the manifest after its own shard,
// before its commit. No collective follows the step boundary: a rank whose
// write fails only keeps the step from being recorded.
absl::StatusOr<std::string> Checkpointer::WriteShardsInBackground(Generation& g,
                                                                 TrainingState* state,
                                                                 const WritePlan& plan) {
  int shard = -1;
  for (size_t i = 0; i < plan.writers.size(); ++i) {
    if (plan.writers[i].rank == g.rank()) shard = static_cast<int>(i);
  }
  if (shard < 0) return std::string();  // a lower rank writes this range
  RETURN_IF_ERROR(CaptureShard(g, *state, plan));
  std::function<absl::Status()> manifest;
  if (g.rank() == 0) {
    manifest = [m = ShardManifest(g, state->step, plan), path = plan.manifest] {
      return checkpoint::WriteManifest(path, m);
    };
  }
  bg_->Submit(ShardPath(g, state->step), Record(g, state->step, plan.cursor, plan.manifest),
              {g.join.generation(), shard, static_cast<int>(plan.writers.size())},
              std::move(manifest));
  return std::string();
}

BackgroundCheckpointWriter& Checkpointer::Writer() {
  if (bg_ == nullptr) {
    BackgroundCheckpointOptions bo;
    bo.write = o_.write_options;
    bo.metrics = metrics_.get();
    bg_ = std::make_unique<BackgroundCheckpointWriter>(
        bo, [this](const v1::CheckpointRecord& r, const CommitTarget& t) {
          return client_->CommitCheckpoint(r, t.generation, t.shard, t.shards);
        });
  }
  return *bg_;
}

}  // namespace worker
}  // namespace tandem
