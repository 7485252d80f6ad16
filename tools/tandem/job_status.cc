#include "tools/tandem/job_status.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "common/rpc/channel.h"
#include "common/status/status_macros.h"
#include "proto/coordinator.grpc.pb.h"

namespace tandem {
namespace cli {

absl::StatusOr<v1::GetJobStatusResponse> FetchJobStatus(const std::string& target,
                                                        const std::string& job_id,
                                                        absl::Duration timeout) {
  auto stub = v1::Coordinator::NewStub(MakeChannel({.target = target}));
  v1::GetJobStatusRequest request;
  request.mutable_job()->set_job_id(job_id);
  v1::GetJobStatusResponse reply;
  RetryOptions retry;
  retry.max_attempts = 3;
  retry.call_timeout = timeout / 3;
  retry.max_backoff = absl::Milliseconds(200);
  absl::Status s = CallWithRetry(retry, absl::StrCat("Coordinator.GetJobStatus at ", target),
                                 [&](grpc::ClientContext* ctx) {
                                   return stub->GetJobStatus(ctx, request, &reply);
                                 });
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (is a coordinator running at ",
                                               target, "?)"));
  }
  return reply;
}

std::unique_ptr<JobWatch> JobWatch::Create(const std::string& target, const std::string& job_id,
                                           const std::string& token) {
  std::unique_ptr<JobWatch> w(new JobWatch());
  w->stub_ = v1::Coordinator::NewStub(MakeChannel({.target = target, .auth_token = token}));
  w->job_id_ = job_id;
  return w;
}

std::vector<v1::LostWorker> JobWatch::NewlyLost(absl::Duration timeout) {
  v1::GetJobStatusRequest request;
  request.mutable_job()->set_job_id(job_id_);
  v1::GetJobStatusResponse reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  std::vector<v1::LostWorker> out;
  if (!stub_->GetJobStatus(&ctx, request, &reply).ok()) return out;
  for (const v1::LostWorker& l : reply.lost()) {
    if (seen_.insert({l.worker_id(), l.generation()}).second) out.push_back(l);
  }
  return out;
}

namespace {

std::string HumanBytes(int64_t b) {
  if (b >= int64_t{1} << 30) return absl::StrFormat("%.2f GiB", b / 1073741824.0);
  if (b >= int64_t{1} << 20) return absl::StrFormat("%.2f MiB", b / 1048576.0);
  if (b >= int64_t{1} << 10) return absl::StrFormat("%.2f KiB", b / 1024.0);
  return absl::StrCat(b, " B");
}

}  // namespace

std::string FormatJobStatus(const v1::GetJobStatusResponse& s) {
  std::string out = absl::StrCat(
      "state ", v1::GetJobStatusResponse::State_Name(s.state()), "  generation ", s.generation(),
      "  world ", s.world_size(), "  restarts ", s.restarts(), "  global batch ",
      s.global_batch_size(), "\n");
  if (s.has_last_checkpoint() && !s.last_checkpoint().path().empty()) {
    const v1::CheckpointRecord& c = s.last_checkpoint();
    absl::StrAppend(&out, "last checkpoint: step ", c.step(), " epoch ", c.cursor().epoch(),
                    " (sample ", c.cursor().samples_in_epoch(), " of the epoch) at ", c.path(), "\n");
  } else {
    absl::StrAppend(&out, "last checkpoint: none\n");
  }
  if (!s.message().empty()) absl::StrAppend(&out, "message: ", s.message(), "\n");
  for (const v1::WorkerStatus& w : s.workers()) {
    const v1::WorkerProgress& p = w.progress();
    absl::StrAppend(&out, absl::StrFormat("  rank %-3d %-20s step %-7d epoch %-3d loss %.4f "
                                          "samples/s %.0f",
                                          w.rank(), w.worker_id(), p.step(), p.epoch(), p.loss(),
                                          p.samples_per_second()));
    if (w.endpoint().metrics_port() > 0) {
      absl::StrAppend(&out, "  metrics http://",
                      w.endpoint().host().empty() ? "127.0.0.1" : w.endpoint().host(), ":",
                      w.endpoint().metrics_port(), "/metrics");
    }
    absl::StrAppend(&out, "\n");
  }
  if (s.shard_servers_size() > 0) {
    absl::StrAppend(&out, "shard servers: ", s.shard_servers_size(), "\n");
  }
  for (const v1::ShardServerStatus& v : s.shard_servers()) {
    std::string ranges;
    for (const v1::FlatRange& r : v.ranges()) {
      absl::StrAppend(&ranges, ranges.empty() ? "" : " ", "[", r.begin(), ", ", r.end(), ")");
    }
    absl::StrAppend(&out, "  ", v.server_id(), "  ", v.address(), "  ranges ",
                    ranges.empty() ? "none (not initialised)" : ranges, "  served ",
                    HumanBytes(v.bytes_served()), "  steps applied ", v.steps_applied(),
                    "  at step ", v.step(), " (generation ", v.generation(), ")\n");
  }
  return out;
}

}  // namespace cli
}  // namespace tandem
