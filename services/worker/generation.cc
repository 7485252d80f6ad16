#include "services/worker/generation.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/comm/factory.h"
#include "common/log/log.h"
#include "common/optim/adamw.h"
#include "common/optim/device_stepper_registry.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeOptimizer(const TrainerOptions& o,
                                                                 optim::ParamRange range) {
  if (o.optimizer == "adamw") {
    optim::AdamWOptions ao;
    ao.weight_decay = static_cast<float>(o.weight_decay);
    ASSIGN_OR_RETURN(std::unique_ptr<optim::AdamW> a, optim::AdamW::Create(range, ao));
    return std::unique_ptr<optim::Optimizer>(std::move(a));
  }
  optim::SgdOptions so;
  so.momentum = static_cast<float>(o.momentum);
  so.nesterov = o.nesterov;
  so.weight_decay = static_cast<float>(o.weight_decay);
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Sgd> s, optim::Sgd::Create(range, so));
  return std::unique_ptr<optim::Optimizer>(std::move(s));
}

namespace {

absl::Status ConnectStore(const TrainerOptions& o, CoordinatorClient* client, Generation* g) {
  CoordinatorStoreOptions so;
  so.channel = client->channel();
  so.job_id = o.job_id;
  so.generation = g->join.generation();
  so.default_wait = o.collective_timeout;
  ASSIGN_OR_RETURN(g->store, CoordinatorStore::Create(so));
  return absl::OkStatus();
}

// The control mesh's options (the gradient groups start from them).
// Control mesh: host memory whatever the backend; a few floats per step and
// the state broadcast once per generation, so small shm slots do.
absl::StatusOr<CommOptions> ControlMeshOptions(const TrainerOptions& o, const Generation& g) {
  const int world = g.world();
  const int64_t gen = g.join.generation();
  const bool all_local = g.join.local_world_size() == world;
  if (o.transport == "shm" && !all_local) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--transport=shm needs every rank on this node, but generation ", gen, " has ",
        g.join.local_world_size(), " of ", world, " ranks here: use --transport=auto or gloo"));
  }
  const bool shm = o.transport != "gloo" && all_local;
  CommOptions ctl;
  ctl.transport = shm ? "shm" : "gloo";
  ctl.rank = g.rank();
  ctl.world_size = world;
  ctl.store = g.store.get();
  ctl.hostname = o.hostname;
  ctl.timeout = o.collective_timeout;
  ctl.prefix = absl::StrCat(o.job_id, "/gen", gen, "/ctl");
  ctl.shm_chunk_bytes = int64_t{256} << 10;
  return ctl;
}

absl::Status CreateGradientGroups(const GenerationEnv& env, const sync::StrategyInfo& info,
                                  const CommOptions& ctl, Generation* g) {
  const TrainerOptions& o = *env.options;
  const int64_t gen = g->join.generation();
  const bool device = !env.backend->host_accessible();
  GroupOptions go;
  go.base = ctl;
  go.base.prefix = absl::StrCat(o.job_id, "/gen", gen, "/grad");
  go.base.shm_chunk_bytes = CommOptions().shm_chunk_bytes;
  go.base.cuda_device = o.cuda_device;
  go.base.cuda_stream = env.backend->native_stream();
  go.node = o.node_id.empty() ? o.hostname : o.node_id;
  // "auto" lets each group pick: shm inside a node, Gloo across nodes.
  go.transport = device ? "nccl" : (o.transport == "gloo" ? "gloo" : "auto");
  go.node_groups = sync::BuildNodeGroups(info, o.sync);
  ASSIGN_OR_RETURN(g->grad, CreateCommGroups(go));
  if (g->rank() == 0) {
    LOG(INFO) << "generation " << gen << ": " << g->world() << " rank(s), " << o.sync.strategy
              << " over " << g->grad.world->backend();
  }
  return absl::OkStatus();
}

// What the strategy trains over: the model's flat buffers and ranges, the
// optimizer factory, the shard servers and the learning rate they apply.
sync::SyncEnv MakeSyncEnv(const GenerationEnv& env, const sync::StrategyInfo& info,
                          Generation* g) {
  const TrainerOptions& o = *env.options;
  tensor::FlatStorage& storage = env.model->storage();
  sync::SyncEnv se;
  se.comms = &g->grad;
  se.params = storage.params();
  se.grads = storage.grads();
  se.size = storage.size();
  for (const nn::GradRange& r : nn::GroupRanges(env.model->layout())) {
    se.ready_ranges.push_back({r.lo, r.hi});
  }
  se.layer_ranges = env.model->param_hook_ranges();
  for (const tensor::ParameterInfo& p : env.model->layout().params()) {
    se.param_shapes.push_back({p.offset, p.shape, p.name});
  }
  const TrainerOptions* options = env.options;
  // A strategy that applies --momentum itself (DGC momentum correction;
  // ValidateTrainerOptions checked sgd without nesterov) gets an optimizer
  // that steps plain SGD (weight decay stays there).
  const bool strategy_momentum = StrategyAppliesMomentum(o);
  if (strategy_momentum) se.momentum = static_cast<float>(o.momentum);
  se.make_optimizer = [options, strategy_momentum](optim::ParamRange range) {
    if (!strategy_momentum) return MakeOptimizer(*options, range);
    TrainerOptions plain = *options;
    plain.momentum = 0;
    return MakeOptimizer(plain, range);
  };
  se.make_device_stepper = optim::DeviceStepperFactoryFor(env.backend);
  se.host_comm = g->ctl.get();  // device ZeRO: gradient norms over host memory
  se.shard_servers.addresses = o.shard_servers;
  se.shard_servers.job_id = o.job_id;
  se.shard_servers.generation = g->join.generation();
  // Read at BeginStep; NaN (no plan yet) makes ps / hybrid push at FinishStep.
  se.shard_servers.learning_rate = [g](int64_t step) {
    return g->lr_schedule.has_value() ? g->lr_schedule->LearningRate(step)
                                      : std::numeric_limits<float>::quiet_NaN();
  };
  return se;
}

}  // namespace

absl::Status SetUpGeneration(const GenerationEnv& env, Generation* g) {
  const TrainerOptions& o = *env.options;
  RETURN_IF_ERROR(ConnectStore(o, env.client, g));
  ASSIGN_OR_RETURN(const CommOptions ctl, ControlMeshOptions(o, *g));
  ASSIGN_OR_RETURN(g->ctl, CreateCommunicator(ctl));
  ASSIGN_OR_RETURN(sync::StrategyInfo info, sync::FindStrategy(o.sync.strategy));
  RETURN_IF_ERROR(CreateGradientGroups(env, info, ctl, g));
  ASSIGN_OR_RETURN(g->sync, sync::CreateGradientSync(o.sync, MakeSyncEnv(env, info, g)));
  // zero3 shards the parameters: the model gathers each layer through the
  // strategy for the generation's life (~Generation unhooks it).
  if (tensor::ParamHook* hook = g->sync->param_hook(); hook != nullptr) {
    env.model->set_param_hook(hook);
    g->hooked_model = env.model;
  }
  return absl::OkStatus();
}

absl::Status LeaveParametersWhole(Generation& g) {
  if (g.hooked_model == nullptr) return absl::OkStatus();
  const int64_t n = g.hooked_model->storage().size();
  RETURN_IF_ERROR(g.sync->param_hook()->Gather(0, n, tensor::ParamPass::kForward));
  g.hooked_model->set_param_hook(nullptr);
  g.hooked_model = nullptr;
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
