// Test-only: what services/worker/checkpointer.cc does with a strategy's
// state, for tests that drive strategies without a worker.
//
//   SaveShards(model, comm, sync, dir, step)  every rank writes its owned
//       range (params and optimizer slice) as a shard file, a barrier, rank 0
//       writes the manifest last (fingerprint 99), a barrier;
//   LoadWhole(model, sync, manifest, &whole)  the whole vector into the
//       model's buffer, the owned optimizer slice, StateLoaded().
//
// Collective over `comm` (every rank calls SaveShards). Errors from the
// checkpoint library as they are.
#ifndef TANDEM_COMMON_SYNC_TESTING_SHARD_CHECKPOINT_H_
#define TANDEM_COMMON_SYNC_TESTING_SHARD_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/checkpoint/checkpoint.h"
#include "common/comm/communicator.h"
#include "common/nn/model.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync_testing {

absl::Status SaveShards(nn::Model& model, Communicator& comm, sync::GradientSync& sync,
                        const std::string& dir, int64_t step);

absl::Status LoadWhole(nn::Model& model, sync::GradientSync& sync, const std::string& manifest,
                       checkpoint::Checkpoint* whole);

}  // namespace sync_testing
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_TESTING_SHARD_CHECKPOINT_H_
