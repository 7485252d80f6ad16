// Checkpointer's ps / hybrid side (checkpointer.h): the shard servers write
// their ranges themselves, synchronously (CommitOnServers) or from rank 0's
// background writer after a snapshot at the step boundary
// (WriteOnServersInBackground).
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "services/worker/checkpointer.h"
#include "services/worker/checkpointer_internal.h"

namespace tandem {
namespace worker {

// ps / hybrid: at the step boundary each server copies its range into its
// snapshot (one RPC round, memory only); rank 0's writer thread then has
// the servers write those copies, writes the manifest and commits, while
// training goes on. The files are those of a synchronous save of the step.
absl::StatusOr<std::string> Checkpointer::WriteOnServersInBackground(Generation& g,
                                                                    TrainingState* state,
                                                                    const WritePlan& plan) {
  RETURN_IF_ERROR(g.sync->SyncStateToHost());  // the servers' state is not fetched
  if (g.rank() != 0) return std::string();
  RETURN_IF_ERROR(MakeDirectories(o_.dir));
  BackgroundCheckpointWriter& writer = Writer();
  writer.Acquire();  // one snapshot at a time: waits for the previous write
  const sync::ServerSaveRequest req = ServerRequest(g, *state, plan);
  ASSIGN_OR_RETURN(sync::ServerSideCheckpoint::ServerWrite write,
                   plan.on_servers->SnapshotOnServers(req));
  const checkpoint::Manifest header = ManifestHeader(g, state->step);
  const std::string manifest = plan.manifest;
  writer.SubmitTask(
      [write, header, manifest]() -> absl::Status {
        ASSIGN_OR_RETURN(std::vector<sync::SavedShard> shards, write());
        checkpoint::Manifest m = header;
        for (const sync::SavedShard& sh : shards) m.shards.push_back({sh.lo, sh.hi, sh.file});
        return checkpoint::WriteManifest(manifest, m);
      },
      plan.manifest, Record(g, state->step, plan.cursor, plan.manifest), {g.join.generation()});
  return std::string();
}


absl::Status Checkpointer::CommitOnServers(Generation& g, const TrainingState& state,
                                           const WritePlan& plan) {
  RETURN_IF_ERROR(MakeDirectories(o_.dir));
  ASSIGN_OR_RETURN(std::vector<sync::SavedShard> shards,
                   plan.on_servers->SaveOnServers(ServerRequest(g, state, plan)));
  checkpoint::Manifest m = ManifestHeader(g, state.step);
  for (const sync::SavedShard& sh : shards) m.shards.push_back({sh.lo, sh.hi, sh.file});
  RETURN_IF_ERROR(checkpoint::WriteManifest(plan.manifest, m));
  return CommitAt(g, state.step, plan.cursor, plan.manifest);
}

sync::ServerSaveRequest Checkpointer::ServerRequest(Generation& g, const TrainingState& state,
                                                   const WritePlan& plan) {
  sync::ServerSaveRequest req;
  // The servers run elsewhere (another working directory, maybe another
  // machine with the same mount): give them an absolute path.
  req.dir = o_.dir;
  if (!req.dir.empty() && req.dir[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) req.dir = absl::StrCat(cwd, "/", o_.dir);
  }
  req.step = state.step;
  req.model_fingerprint = o_.fingerprint;
  for (const optim::StateBuffer& b : g.sync->extra_state()) {
    req.blobs.push_back({BlobName(b), std::string(reinterpret_cast<const char*>(b.data.data()),
                                                  b.data.size() * sizeof(float))});
  }
  if (std::string b = model_->SaveBuffers(); !b.empty()) req.blobs.push_back({kBuffersBlob, b});
  req.blobs.push_back({"data_cursor", plan.cursor.SerializeAsString()});
  req.blobs.push_back({"model_spec", o_.model_text});
  if (!state.loss_scaler.empty()) req.blobs.push_back({"loss_scaler", state.loss_scaler});
  return req;
}

}  // namespace worker
}  // namespace tandem
