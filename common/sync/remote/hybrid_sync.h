// HybridSync: the `hybrid` strategy, tandem's parameter-server + ring shape.
// Inside a node the K ranks reduce-scatter; each local rank exchanges only
// its 1/K with the shard servers; the node allgathers the result.
//
// The ShardLayout's chunks (common/shard/shard_layout.h) are taken K at a
// time: group g = chunks [gK, gK + K); local rank l owns chunk gK + l of
// every group. Per step:
//
//   backward  -> a group is final: the communication thread reduce-scatters
//                it over the intra-node group (chunks packed into K blocks of
//                the group's largest chunk) in a fixed order (last group
//                first, as backward produces them), queues its own chunk's
//                node sum for the chunk's server with weight K (RemoteShards:
//                each push lane sends this rank's chunks first chunk first,
//                the same order on every rank, lane_queue.h) and
//                (pipeline=1, the default) that chunk's pull right behind
//                the push: a server (apply=chunk, the default)
//                applies a chunk once every node's contribution is in
//                (weights add up to the world size) and answers its pulls
//                while later groups are still being pushed;
//   FinishStep -> every push acknowledged (pipeline=0: only now each rank
//                pulls its own chunks); then each group's landing is queued
//                on the communication thread, first group first (the order
//                the pulls come back and the next forward needs them): wait
//                for this rank's pulled chunk of the group, then allgather
//                the group inside the node;
//   next step  -> pipeline=1 (the default): the strategy is the model's
//                parameter hook (param_hook(), tensor/param_hook.h): a
//                layer's Gather waits only for the landing of the groups
//                under it, so the next forward starts while later groups
//                are still arriving; BeginStep, checkpoints and the
//                generation's end wait for the rest. pipeline=0: FinishStep
//                waits for every landing.
//
// Cross-node traffic per rank is about 2n/K floats (push + pull of its
// slice) instead of a flat ring's 2n(N-1)/N, and the servers add their
// bandwidth. Nodes may differ in size (each pushes with its own K).
// First step of a generation, the step numbering, the learning rate, what
// is refused (clipping, device memory, loss scaling) and failure: as
// ps_sync.h. Workers keep no optimizer state; staging is a node-reduced
// slice of about n/K floats (none with one rank per node: pushes go from
// the gradient buffer) plus two groups of K blocks.
//
// --sync_opt compress=int8 (default none) compresses both directions:
//   - each push carries the rank's node-summed chunk as an int8 codec block
//     (int8_codec.h, one fp32 scale per 1024 values, nearest rounding,
//     about 1/4 of the fp32 bytes) encoded with error feedback: what
//     quantization dropped is kept per rank, by flat offset, and added to
//     the next step's push (error_feedback.h). The server dequantizes and
//     sums in fp32;
//   - each pull is the chunk's int8 parameter delta (ShardServer
//     pull_int8_chunk, services/shardserver/range_store.h): the server
//     keeps the reference (what the workers hold), encodes master -
//     reference after every step and adds the decoded delta to the
//     reference; the rank adds the same decoded delta to its parameters
//     (the same DecodeAdd kernel, so every node holds the reference bit for
//     bit) and the node allgathers as before. What a delta's rounding
//     dropped stays in the next one (error feedback on the server), so the
//     workers trail the fp32 master by at most one rounding, never drift.
//     Before every checkpoint (SyncStateToHost) each rank pulls its chunks'
//     fp32 master with reset_delta_reference and the node allgathers them:
//     every rank then holds the master exactly, which is what the
//     checkpoint saves and what a resume starts from, so an interrupted and
//     an uninterrupted run continue identically.
// --sync_opt ring_share=auto|F (default 0; hybrid_split.h, hybrid_ring.h):
// the prefix of the vector holding a share F (whole chunk groups) is not
// sent to the servers: once backward has finished it, the communication
// thread sums it over every rank the way allreduce does (hier=1's pieces:
// node reduce-scatter, a ring among the nodes, node allgather; the world's
// ring with one rank per node or unequal nodes) while the servers' pushes
// and pulls are still in flight, and FinishStep steps it with the trainer's
// optimizer (its state on every worker, in front of the servers' in
// checkpoints). So a node's link also carries part of the step when there
// are fewer servers than nodes; auto picks F so node and server links are
// equally busy (0 with as many servers as nodes). With F > 0 the servers
// keep no replicas and do not write checkpoints themselves (the workers
// do, from rank 0), and compress=int8 is refused.
// The push residuals are strategy state: extra_state() "hybrid/meta" and
// "hybrid/residuals" (every rank's, gathered onto rank 0 by SyncStateToHost
// and sent back by StateLoaded, both collective over the world group, as
// the compressed strategy does); at another world size, vector size or
// int8 chunk they restart from zero with a log line. Residuals take n
// floats per rank (zeros outside its chunks; rank 0 holds world * n around
// checkpoints); the servers keep one more fp32 copy of their range (the
// reference) and the encoded deltas. compress=none pushes and pulls fp32
// exactly as before and has no extra state.
#ifndef TANDEM_COMMON_SYNC_REMOTE_HYBRID_SYNC_H_
#define TANDEM_COMMON_SYNC_REMOTE_HYBRID_SYNC_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sync/gradient_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {

// hybrid's --sync_opt keys: ps's (shard_server_state.h) plus compress.
std::vector<OptionInfo> HybridSyncOptionInfo();
absl::Status ValidateHybridSyncOptions(const SyncOptions& options);

absl::StatusOr<std::unique_ptr<GradientSync>> CreateHybridSync(const SyncOptions& options,
                                                              SyncEnv env);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_HYBRID_SYNC_H_
