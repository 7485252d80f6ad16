// Generation: the objects one membership generation trains with, built
// together after a join and destroyed together when it ends (a failure, a
// re-join, the end of the run): the coordinator-backed store, the control
// mesh (a few floats per step and the state broadcast, host memory), the
// gradient strategy's communicator groups, the strategy itself (registry
// name from --sync) and the data stream.
//
//   Generation g;  g.join = *client->Join(timeout);
//   RETURN_IF_ERROR(SetUpGeneration(env, &g));   // meshes + strategy
//   // restore state (Checkpointer), stream data, train
//
// Transports: the control mesh and the gradient groups use shared memory
// when every rank of the generation is on this node and --transport allows
// it, else Gloo TCP; on a device backend the gradient groups are NCCL.
// Thread-compatible (the trainer thread). The Generation owns everything in
// it; members are destroyed in reverse order (the strategy before the
// communicators it borrows). Failure: a configuration that cannot work for
// this membership (--transport=shm across nodes) is INVALID_ARGUMENT; a
// peer that does not show up is the transport's DEADLINE_EXCEEDED /
// UNAVAILABLE (a membership problem: re-join).
#ifndef TANDEM_SERVICES_WORKER_GENERATION_H_
#define TANDEM_SERVICES_WORKER_GENERATION_H_

#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "common/comm/communicator.h"
#include "common/comm/coordinator_store.h"
#include "common/comm/groups.h"
#include "common/data/prefetch_client.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "common/optim/optimizer.h"
#include "common/optim/schedule.h"
#include "common/sync/gradient_sync.h"
#include "proto/coordinator.pb.h"
#include "services/worker/coordinator_client.h"
#include "services/worker/trainer_options.h"

namespace tandem {
namespace worker {

struct Generation {
  v1::JoinResponse join;
  std::unique_ptr<CoordinatorStore> store;
  std::unique_ptr<Communicator> ctl;
  CommGroups grad;
  std::unique_ptr<sync::GradientSync> sync;
  std::unique_ptr<data::PrefetchClient> data;
  sync::SyncStats last_stats;  // at the last metrics update
  // This generation's learning-rate schedule, once planned (ps / hybrid
  // read it to push the learning rate with gradients during backward).
  std::optional<optim::LrSchedule> lr_schedule;
  // The model whose parameter hook is the strategy's (zero3), or null.
  nn::Model* hooked_model = nullptr;

  int rank() const { return join.rank(); }
  int world() const { return join.world_size(); }

  Generation() = default;
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;
  ~Generation() {
    // The strategy's communication thread uses the groups: stop it first.
    data.reset();
    if (hooked_model != nullptr) hooked_model->set_param_hook(nullptr);
    sync.reset();
  }
};

struct GenerationEnv {
  const TrainerOptions* options = nullptr;  // borrowed
  CoordinatorClient* client = nullptr;      // borrowed: its channel backs the store
  kernels::Backend* backend = nullptr;      // borrowed
  nn::Model* model = nullptr;               // borrowed
};

// Builds the optimizer --optimizer names over `range`.
absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeOptimizer(const TrainerOptions& options,
                                                                 optim::ParamRange range);

// Fills g->store, g->ctl, g->grad and g->sync from g->join; installs the
// strategy's parameter hook (zero3) on the model.
absl::Status SetUpGeneration(const GenerationEnv& env, Generation* g);

// At the end of a run (collective: every rank at the same step): a
// strategy that shards the parameters (zero3) gathers the whole vector into
// the model and unhooks it, so the model holds the trained parameters as
// with every other strategy. No-op otherwise.
absl::Status LeaveParametersWhole(Generation& g);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_GENERATION_H_
