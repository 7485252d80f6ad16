// `tandem status`: asks a running coordinator for its job status and formats
// it for a terminal.
//
//   ASSIGN_OR_RETURN(v1::GetJobStatusResponse s,
//                    FetchJobStatus("127.0.0.1:7000", "local", absl::Seconds(5)));
//   std::cout << FormatJobStatus(s);
//
// Thread-safe. FetchJobStatus fails with UNAVAILABLE / DEADLINE_EXCEEDED /
// UNAUTHENTICATED naming the address when no coordinator answers within
// `timeout` (bounded retries, never a hang); ExplainStatusFailure says
// which of "nothing listens", "TLS refused", "token refused", "job
// finished" (or "no answer") it was.
#ifndef TANDEM_TOOLS_TANDEM_JOB_STATUS_H_
#define TANDEM_TOOLS_TANDEM_JOB_STATUS_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/channel.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/coordinator.pb.h"

namespace tandem {
namespace cli {

// `channel`'s token and TLS settings are used (its target is ignored);
// unset = the process defaults. A closed port fails at once (UNAVAILABLE),
// not after `timeout`.
absl::StatusOr<v1::GetJobStatusResponse> FetchJobStatus(const std::string& target,
                                                        const std::string& job_id,
                                                        absl::Duration timeout,
                                                        ChannelOptions channel = {});

// Why FetchJobStatus failed, as the user can act on it.
enum class StatusFailure {
  kNothingListens,  // connection refused: the coordinator has exited, or a wrong address
  kTlsRefused,      // a connection, but no gRPC over it: TLS on one side only, or another CA
  kTokenRefused,    // UNAUTHENTICATED: the wrong job's token, or none
  kNoAnswer,        // connected, no answer in time: stopped or overloaded
  kOther,
};
StatusFailure ClassifyStatusFailure(const std::string& target, const absl::Status& error);

// One message for the user: what was met and what to do. `run_dir` (""
// when unknown; the directory of --token_file for a tandem local job) turns
// "nothing listens" into "the job has finished" (with its result) or "the
// job stopped at step S" when its coordinator state says so; `tls` says
// whether --tls_* flags were given.
std::string ExplainStatusFailure(const std::string& target, const absl::Status& error,
                                 bool tls, const std::string& run_dir);

// Several lines: state, generation, world size, restarts, the last committed
// checkpoint, the coordinator's message, then one line per worker (rank, id,
// step, epoch, loss, samples/s, metrics address), then one line per shard
// server that reported (id, address, ranges, bytes served, steps applied),
// then the ranks named as stragglers ("stragglers: none" while running).
std::string FormatJobStatus(const v1::GetJobStatusResponse& status);

// A supervisor's view of the coordinator (`tandem local`): polls its job
// status over one channel and hands back each worker it expelled, once.
//
//   ASSIGN_OR_RETURN(auto watch, JobWatch::Create("127.0.0.1:7000", "local"));
//   for (const v1::LostWorker& w : watch->NewlyLost()) KillProcessOf(w.worker_id());
//
// Not thread-safe (one supervisor thread). NewlyLost never blocks longer
// than `timeout`; an unreachable coordinator (restarting) yields nothing.
class JobWatch {
 public:
  // `token`: the job's (common/rpc/auth.h), "" = the process default.
  static std::unique_ptr<JobWatch> Create(const std::string& target, const std::string& job_id,
                                          const std::string& token = "");
  std::vector<v1::LostWorker> NewlyLost(absl::Duration timeout = absl::Milliseconds(250));
  // Call before starting this supervisor's workers. The generation the
  // coordinator holds now (restored from its state directory when a run is
  // resumed) and every earlier one belong to processes of a previous run:
  // NewlyLost never hands back a loss in them, so a restored member
  // expelled for its silence is not taken for the new process of that
  // name. False (nothing ignored) when the coordinator did not answer.
  bool IgnoreEarlierGenerations(absl::Duration timeout);
  // From the status NewlyLost fetched: a line for each rank named a
  // straggler since the previous call, and one for each that was cleared.
  std::vector<std::string> StragglerChanges();

 private:
  JobWatch() = default;
  bool Fetch(absl::Duration timeout, v1::GetJobStatusResponse* reply);
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::string job_id_;
  std::set<std::pair<std::string, int64_t>> seen_;  // (worker_id, generation)
  int64_t ignore_through_ = 0;  // losses in generations <= this are not ours
  std::vector<v1::Straggler> stragglers_;   // in the last reply
  std::map<std::string, v1::Straggler> named_;  // by worker_id, as last reported
};

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_JOB_STATUS_H_
