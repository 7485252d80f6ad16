// RunLocal: `tandem local` minus flag parsing. Starts a coordinator, one data
// server and N workers as child processes on this machine, supervises them
// and stops every one of them when the job ends, fails or is interrupted.
//
//   LocalEnv env;
//   env.self_exe = "/proc/self/exe" resolved;     // to find the service binaries
//   env.out = stdout;                               // progress and messages
//   env.stop_requested = [] { return got_signal != 0; };
//   absl::Status s = RunLocal(options, env);
//
// Ports: the coordinator and data server bind port 0 and report their gRPC
// port through --port_file and their /metrics port in their first log line;
// workers bind /metrics on port 0 before joining and log it the same way.
// Nothing uses a fixed port unless LocalOptions::port asks for one for the
// coordinator.
// Output: the job, the run directory, the coordinator address and every
// /metrics address (once, at the start); then the workers' stdout lines (rank
// 0 prints progress and accuracy); at the end one line per worker that did
// not exit cleanly (how it ended and its last log line) and a one-line
// summary. Each process's stderr goes to <run_dir>/<name>.log, never to
// the console (a previous run's log there moves to <name>.log.prev).
// Resume: every worker gets --incarnation, one id per RunLocal; a run
// directory whose coordinator state holds an interrupted run is resumed
// from its last committed checkpoint (the coordinator tells the new
// workers from the stored generation's by the incarnation). A clean end
// writes rank 0's last accuracy line to <run_dir>/result (run_dir.h).
// Restarts: a coordinator or data server that exits before the job ends is
// started again on the same port (the coordinator from its state directory,
// so the running generation carries on), at most LocalOptions::max_restarts
// times in all; one more exit is a failure saying the restarts are used up.
// Lost workers: the coordinator's job status is polled a few times per
// heartbeat period; a worker it expelled (missed heartbeats: hung, stopped)
// is killed with SIGKILL and the console says which rank and why, so a run
// never waits on a hung process.
// Token: each run writes a fresh job token to <run_dir>/token (mode 0600)
// and passes --token_file to every process; every RPC carries it and the
// coordinator and data server refuse calls without it (UNAUTHENTICATED).
// Failure: a child that exits non-zero (or is killed as lost) before the job
// ends stops every process (SIGTERM, SIGKILL after LocalOptions::grace) and
// returns an error naming the process, how it ended and the tail of its log. With keep_going, a worker that dies is left
// to the coordinator (the generation ends; survivors re-join or exit); the
// run ends when every worker has exited and fails if any worker exited with
// an error status or none finished (a worker killed by a signal while the
// others finished counts as lost, not failed). stop_requested() true: the same stop,
// returning CANCELLED.
//
// Simulated nodes (LocalOptions::nodes > 0, sim_network.h): this thread
// enters a private network namespace before any child starts; the
// coordinator and data server listen on 127.0.1.100, worker i on its node's
// 127.0.1.n with --node_id=node-n and LD_PRELOAD=libtandem_bind_source.so
// (its outgoing connections leave from that address). The header then has a
// "network:" line and the end a "links: bytes sent to other nodes: ..."
// line from the tc class counters. No privilege for a namespace:
// FAILED_PRECONDITION before anything starts.
//
// Not thread-safe: call from one thread (the one that owns the children).
#ifndef TANDEM_TOOLS_TANDEM_LOCAL_RUN_H_
#define TANDEM_TOOLS_TANDEM_LOCAL_RUN_H_

#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "tools/tandem/local_options.h"

namespace tandem {
namespace cli {

struct LocalEnv {
  std::string self_exe;  // path of the tandem binary (for runfiles lookup)
  std::FILE* out = stdout;
  std::function<bool()> stop_requested = [] { return false; };
};

absl::Status RunLocal(const LocalOptions& options, const LocalEnv& env);

// The first line of a run: workers, model, dataset, how long (epochs, or
// --max_steps steps), the batch (per worker, or the --batch auto range),
// optimizer and lr, precision, sync strategy and options.
std::string JobHeader(const LocalOptions& o);

// The port in a log line such as "metrics port 9100" or "metrics_port=9100";
// -1 when `text` has none (or only "metrics_port=-1"/0, i.e. disabled).
int ParseMetricsPort(const std::string& text);

// The address worker `index` binds and advertises: o.host, or with --nodes
// its node's (worker i is on node i / workers_per_node + 1, 127.0.1.<node>).
std::string WorkerHost(const LocalOptions& o, int index);

// The worker command line `tandem local` uses for worker `index` (without
// --metrics_port, which RunLocal appends).
std::vector<std::string> WorkerArgv(const LocalOptions& o, const DatasetFiles& data,
                                    const std::string& binary, const std::string& coordinator,
                                    const std::string& data_server, int index,
                                    const std::string& run_dir);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_LOCAL_RUN_H_
