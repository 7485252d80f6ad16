// MeasureShardRound: what one round of shard-server calls costs on this
// machine, for `tandem plan --calibrate` (machine_profile.h:
// shard_round_2_s ... shard_round_16_s), as ring_round.h measures a ring
// round.
//
//   ASSIGN_OR_RETURN(ShardRound s, MeasureShardRound({.workers = 16}));  // s.round_s, s.call_cpu_s
//
// S = max(1, workers / 2) forked processes each run a real shard server
// (services/shardserver, on 127.0.0.1, port 0) — one per node of two
// workers, the layout tools/bench/strategies.sh gives ps and hybrid —
// and `workers` forked processes each hold a real ShardClient per server.
// Per round, every worker pushes a chunk of `floats` to every server (one
// PushGradients stream each, as ps and hybrid push a chunk), then pulls
// each back once its server has applied the round (apply per chunk, world
// = workers: a pull waits for every worker's push, as a step's does).
// Worker 0 times `round_trips` rounds after 3 untimed; the result is the
// median of `repetitions` such runs, per round and server: the seconds one
// chunk's push + pull adds to a worker's step (round_s). call_cpu_s: the CPU
// seconds one chunk's push + pull costs the worker and the server together
// (every worker's own CPU clock over its timed runs, plus the servers' CPU
// from /proc over worker 0's, divided by the calls). What it captures is what a
// ps / hybrid step pays per chunk on a host whose cores its processes
// share: the calls' CPU on both ends (protobuf, HTTP/2, the server's sum
// and apply) and every wake-up waiting to be scheduled among the other
// processes — under the machine's current load, like the ring rounds.
//
// Call it from a process that has not started gRPC (it forks; tandem
// plan --calibrate does). Failure: workers < 1, floats, round_trips or
// repetitions < 1 are INVALID_ARGUMENT; a process that fails (server start,
// a call: 30 s timeout) or fork / pipe is UNAVAILABLE.
#ifndef TANDEM_TOOLS_TANDEM_PLAN_RPC_CALIBRATE_H_
#define TANDEM_TOOLS_TANDEM_PLAN_RPC_CALIBRATE_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tandem {
namespace cli {

struct ShardRoundOptions {
  int workers = 2;
  int64_t floats = 1024;  // per chunk (tandem plan --calibrate: the model's)
  int round_trips = 20;
  int repetitions = 3;
};

struct ShardRound {
  double round_s = 0;     // wall seconds per round and server
  double call_cpu_s = 0;  // CPU seconds per chunk push + pull, both ends
};

absl::StatusOr<ShardRound> MeasureShardRound(const ShardRoundOptions& options);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_PLAN_RPC_CALIBRATE_H_
