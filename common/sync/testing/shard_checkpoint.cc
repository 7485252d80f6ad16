#include "common/sync/testing/shard_checkpoint.h"

#include <algorithm>
#include <vector>

#include "absl/types/span.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync_testing {

absl::Status SaveShards(nn::Model& model, Communicator& comm, sync::GradientSync& sync,
                        const std::string& dir, int64_t step) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  RETURN_IF_ERROR(sync.SyncStateToHost());
  const int rank = comm.rank(), world = comm.world_size();
  const int64_t n = model.storage().size();
  checkpoint::Manifest man;
  man.model_fingerprint = 99;
  man.step = step;
  man.total_params = n;
  man.world_size = world;
  man.strategy = sync.name();
  man.optimizer_name = sync.optimizer()->name();
  // Every rank's owned range (int64 pairs), then who writes what.
  const optim::ParamRange mine = sync.owned_range();
  std::vector<int64_t> ranges(2 * world);
  const int64_t my_range[2] = {mine.lo, mine.hi};
  RETURN_IF_ERROR(comm.AllGather(my_range, ranges.data(), sizeof(my_range)));
  std::vector<optim::ParamRange> owned;
  for (int r = 0; r < world; ++r) owned.push_back({ranges[2 * r], ranges[2 * r + 1]});
  ASSIGN_OR_RETURN(std::vector<checkpoint::ShardWriter> writers,
                   checkpoint::PlanShardWriters(owned, n));
  bool write = false;
  for (const checkpoint::ShardWriter& w : writers) {
    man.shards.push_back({w.lo, w.hi, checkpoint::ShardFileName(step, w.rank, world)});
    write = write || w.rank == rank;
  }
  if (write) {
    checkpoint::CheckpointView v;
    v.model_fingerprint = 99;
    v.step = step;
    v.total_params = n;
    v.range_lo = mine.lo;
    v.range_hi = mine.hi;
    v.params = absl::MakeConstSpan(model.storage().params() + mine.lo, mine.size());
    checkpoint::AddOptimizerState(*sync.optimizer(), &v);
    RETURN_IF_ERROR(checkpoint::WriteCheckpoint(
        dir + "/" + checkpoint::ShardFileName(step, rank, world), v));
  }
  RETURN_IF_ERROR(comm.Barrier());
  if (rank == 0) {
    RETURN_IF_ERROR(checkpoint::WriteManifest(checkpoint::ManifestPath(dir, step), man));
  }
  return comm.Barrier();
}

absl::Status LoadWhole(nn::Model& model, sync::GradientSync& sync, const std::string& manifest,
                       checkpoint::Checkpoint* whole) {
  checkpoint::ReadOptions ro;
  ro.expected_model_fingerprint = 99;
  ASSIGN_OR_RETURN(*whole, checkpoint::ReadWholeCheckpoint(manifest, ro));
  if (static_cast<int64_t>(whole->params.size()) != model.storage().size()) {
    return absl::FailedPreconditionError("size");
  }
  std::copy(whole->params.begin(), whole->params.end(), model.storage().params());
  RETURN_IF_ERROR(checkpoint::RestoreOptimizerSlice(*whole, sync.optimizer()));
  return sync.StateLoaded();
}

}  // namespace sync_testing
}  // namespace tandem
