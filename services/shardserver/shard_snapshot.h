// ShardSnapshot: a shard server's copy of its range (fp32 master weights
// and optimizer state) at one step, and the checkpoint shard file written
// from it (ShardServer.SaveShard). A synchronous save captures into a
// local snapshot and writes it; a background checkpoint (issue 34 item 4)
// captures into the server's one held snapshot at the step boundary
// (SAVE_SNAPSHOT: a memory copy) and writes it later (SAVE_FROM_SNAPSHOT)
// while training goes on — the same bytes either way.
//
//   ShardSnapshot s;
//   RETURN_IF_ERROR(CaptureShard(store, generation, step, &s));   // buffers reused
//   ASSIGN_OR_RETURN(int64_t bytes, WriteShardFile(s, request));
//
// Memory: (1 + optimizer buffers) x 4 bytes per element of the range,
// allocated at the first capture and reused. Not thread-safe (the caller
// holds a mutex around a shared snapshot). Errors: the store's
// (FAILED_PRECONDITION when not at `step`), INVALID_ARGUMENT for a
// total_params below the range's end, the file system's.
#ifndef TANDEM_SERVICES_SHARDSERVER_SHARD_SNAPSHOT_H_
#define TANDEM_SERVICES_SHARDSERVER_SHARD_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"
#include "proto/shardserver.pb.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {

struct ShardSnapshot {
  int64_t step = -1;  // -1: empty
  int64_t generation = 0;
  optim::ParamRange range;
  std::string optimizer_name;
  std::vector<float> params;
  std::vector<std::pair<std::string, std::vector<float>>> state;

  int64_t bytes() const;
};

absl::Status CaptureShard(RangeStore& store, int64_t generation, int64_t step, ShardSnapshot* s);

// Writes `s` to request.path with the request's header fields and blobs
// (atomically: temporary name, fsync, rename); returns the bytes of
// parameters and optimizer state written.
absl::StatusOr<int64_t> WriteShardFile(const ShardSnapshot& s, const v1::SaveShardRequest& request);

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_SHARD_SNAPSHOT_H_
