// Internal to the checkpointer (checkpointer.cc, checkpointer_servers.cc):
// the names of the blobs it writes besides parameters and optimizer state,
// and its write plan (who writes which shard, what is committed).
#ifndef TANDEM_SERVICES_WORKER_CHECKPOINTER_INTERNAL_H_
#define TANDEM_SERVICES_WORKER_CHECKPOINTER_INTERNAL_H_

#include <string>

#include "absl/strings/str_cat.h"
#include <vector>

#include "common/checkpoint/sharded_checkpoint.h"
#include "common/optim/optimizer.h"
#include "common/sync/remote/server_side_checkpoint.h"
#include "proto/dataserver.pb.h"
#include "services/worker/checkpointer.h"

namespace tandem {
namespace worker {

// The model's registered buffers (BatchNorm statistics; nn::Model::SaveBuffers).
inline constexpr char kBuffersBlob[] = "model_buffers";

// A strategy's extra state buffer `b` (GradientSync::extra_state).
inline std::string BlobName(const optim::StateBuffer& b) { return absl::StrCat("sync/", b.name); }

struct Checkpointer::WritePlan {
  optim::ParamRange owned;
  std::vector<checkpoint::ShardWriter> writers;
  bool single = false;      // one whole shard (allreduce): the single-file layout
  std::string manifest;     // several shards: written last by rank 0
  std::string single_path;
  std::string path;         // what is committed
  bool i_write = false;     // this rank writes a shard file
  sync::ServerSideCheckpoint* on_servers = nullptr;  // ps / hybrid: the servers write
  v1::DataCursor cursor;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_CHECKPOINTER_INTERNAL_H_
