// Sharded checkpoints: one checkpoint file (checkpoint.h format) per rank
// holding that rank's range of the flat vector, plus a manifest that records
// the global layout (which file holds which [lo, hi)). Because shards store
// real, unpadded ranges and the manifest says who owned what, a checkpoint
// written by any strategy at any world size loads into any other: the
// reader assembles the whole vector and each rank takes the slice its new
// strategy owns (RestoreOptimizerSlice). The allreduce strategy writes its
// full state as a single shard [0, n).
//
//   // every rank with a non-empty range:
//   WriteCheckpoint(dir + "/" + ShardFileName(step, rank, world), view_of_my_range);
//   // barrier; then rank 0, last:
//   Manifest m;  m.shards = {{lo0, hi0, ShardFileName(step, 0, world)}, ...};
//   RETURN_IF_ERROR(WriteManifest(ManifestPath(dir, step), m));
//   ...
//   ASSIGN_OR_RETURN(Checkpoint full, ReadShardedCheckpoint(manifest_path, ro));
//   RETURN_IF_ERROR(RestoreOptimizerSlice(full, optimizer));   // any owned range
//
// Manifest file (text, written atomically with WriteFileAtomically, so a
// manifest exists only once every shard it names was written before it):
//
//   tandem-manifest 1
//   fingerprint <u64>            step <i64>        total_params <i64>
//   world_size <int>             strategy <name>   optimizer <name or ->
//   shard <lo> <hi> <file name>  (one line per shard, ascending lo; the
//                                 files lie in the manifest's directory)
//   crc32c <8 hex digits of every byte before this line>
//
// (one key per line). The shards must tile [0, total_params) exactly.
// Failure: every error names the file at fault. A missing shard: NotFound
// naming it. A shard whose header disagrees with the manifest (range, step,
// model, optimizer) or a manifest that does not tile its vector: DataLoss.
// Another model's manifest: FailedPrecondition (as ReadCheckpoint). Readers
// never modify anything; a failed read leaves the caller's state as it was.
// Thread-safe for distinct paths.
#ifndef TANDEM_COMMON_CHECKPOINT_SHARDED_CHECKPOINT_H_
#define TANDEM_COMMON_CHECKPOINT_SHARDED_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace checkpoint {

struct ManifestShard {
  int64_t lo = 0;
  int64_t hi = 0;
  std::string file;  // base name, in the manifest's directory
};

struct Manifest {
  uint64_t model_fingerprint = 0;
  int64_t step = 0;
  int64_t total_params = 0;
  int world_size = 1;         // of the run that wrote it (informational)
  std::string strategy;       // "zero2", "allreduce" (informational)
  std::string optimizer_name; // empty: no optimizer state
  std::vector<ManifestShard> shards;  // ascending lo, tiling [0, total_params)
};

// "<dir>/step-00000100.manifest".
std::string ManifestPath(const std::string& dir, int64_t step);
// "step-00000100.shard-00003-of-00004.tckpt".
std::string ShardFileName(int64_t step, int rank, int world);
// True for a path ending in ".manifest".
bool IsManifestPath(absl::string_view path);

// Who writes which shard, from every rank's owned range (rank order): each
// distinct non-empty range is one shard, written by the lowest rank that
// owns it (the allreduce strategy, where every rank owns [0, n), gives one
// shard written by rank 0). Shards come back ascending; InvalidArgument
// when the distinct ranges do not tile [0, total_params).
struct ShardWriter {
  int rank = 0;
  int64_t lo = 0;
  int64_t hi = 0;
};
absl::StatusOr<std::vector<ShardWriter>> PlanShardWriters(
    const std::vector<optim::ParamRange>& owned_by_rank, int64_t total_params);

// InvalidArgument when the shards do not tile [0, total_params) or a file
// name is empty or has a '/' or whitespace.
absl::Status WriteManifest(const std::string& path, const Manifest& manifest);
absl::StatusOr<Manifest> ReadManifest(const std::string& path, const ReadOptions& options);

// Reads the manifest and every shard, checks each shard against it, and
// returns the whole vector as one Checkpoint over [0, total_params): params,
// every optimizer buffer, and the blobs of the shard that starts at 0.
absl::StatusOr<Checkpoint> ReadShardedCheckpoint(const std::string& manifest_path,
                                                 const ReadOptions& options);

// A manifest (ReadShardedCheckpoint) or a single checkpoint file, which must
// then cover the whole vector (FailedPrecondition naming the file if not).
absl::StatusOr<Checkpoint> ReadWholeCheckpoint(const std::string& path,
                                               const ReadOptions& options);

// Copies into `optimizer` its range of the checkpoint's optimizer state;
// the checkpoint's range must contain the optimizer's. Same checks as
// RestoreOptimizerState (name, buffers, sizes), everything before copying.
absl::Status RestoreOptimizerSlice(const Checkpoint& checkpoint, optim::Optimizer* optimizer);

}  // namespace checkpoint
}  // namespace tandem

#endif  // TANDEM_COMMON_CHECKPOINT_SHARDED_CHECKPOINT_H_
