// PsSync: the `ps` strategy. The shard servers (services/shardserver) hold
// the fp32 master weights and the optimizer state; workers hold neither an
// optimizer nor its state: optimizer() is an OptimizerMirror
// (optimizer_mirror.h) whose buffers exist only while a checkpoint is
// written by rank 0 (SyncStateToHost fetches the servers' state into it;
// the worker's checkpointer instead has the servers write their shards,
// server_side_checkpoint.h) or restored (StateLoaded: rank 0 sends it with the next InitShard), so
// checkpoints carry the optimizer state in the format every strategy
// reads; owned_range() is the whole vector they hold; memory() counts
// optimizer bytes only around checkpoints.
//
//   step t:  backward reports ranges -> every chunk of the ShardLayout
//            (common/shard/shard_layout.h; chunk_mb, 0.25 MiB by default)
//            that became final is queued for its server (RemoteShards:
//            streams_per_server streams per server in flight, each
//            sending its chunks first chunk first, the same order on
//            every rank, lane_queue.h), weight 1, with step t, lr(t) and the step's
//            grad_scale, and (pipeline=1, the default) its pull is issued
//            right behind it on the pull lanes: the server (apply=chunk,
//            the default) applies a chunk as soon as every rank's push of
//            it is in and answers its pulls while later chunks are still
//            being pushed, so both directions of every link are busy;
//            FinishStep: the push streams end (every push acknowledged) and
//            it returns. The pulled chunks land in the parameters (backward
//            is done with a chunk once it is final) while the next forward
//            runs: the strategy is the model's parameter hook
//            (param_hook(), tensor/param_hook.h) and a layer's Gather waits
//            only for the chunks under it. BeginStep, SyncStateToHost,
//            StateLoaded and SaveOnServers first wait for every pull, so
//            checkpoints read the step's parameters; a pull's error is
//            returned by the Gather or call that waited for it.
//            pipeline=0: FinishStep pulls every chunk before it returns
//            (the servers apply the optimizer once every rank's
//            contribution is in: grad_scale / world, the allreduce average).
//
// First step of a generation: rank 0 sends every server its range of the
// current parameters (InitShard: layout, world size, optimizer described
// from make_optimizer's, last applied step = context.step - 1), the world
// barriers, then the step's chunks are pushed (this step's pushes wait for
// FinishStep: its number is not known before). Later steps are numbered on
// from there; a FinishStep whose context.step is not the next number fails.
// Without a learning_rate schedule in the env every step's pushes wait for
// FinishStep's context (no overlap).
//
// Results equal the allreduce strategy's up to float summation order
// (tested within 1e-5). Not supported (refused with the reason): global
// gradient clipping (max_grad_norm > 0: the norm lives on the servers),
// device memory, a context grad_scale other than 1 (loss scaling).
// Thread-safety and failure as gradient_sync.h: the first error (a refusal,
// a server gone past the timeout) is returned by FinishStep naming the
// server, and the object is done.
#ifndef TANDEM_COMMON_SYNC_REMOTE_PS_SYNC_H_
#define TANDEM_COMMON_SYNC_REMOTE_PS_SYNC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/sync/gradient_sync.h"
#include "common/sync/registry.h"
#include "common/sync/remote/shard_server_state.h"  // the knobs ps and hybrid share

namespace tandem {
namespace sync {

absl::StatusOr<std::unique_ptr<GradientSync>> CreatePsSync(const SyncOptions& options, SyncEnv env);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_PS_SYNC_H_
