#include "tools/tandem/job_status.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "common/rpc/channel.h"
#include "common/status/status_macros.h"
#include "proto/coordinator.grpc.pb.h"
#include "tools/tandem/run_dir.h"

namespace tandem {
namespace cli {

absl::StatusOr<v1::GetJobStatusResponse> FetchJobStatus(const std::string& target,
                                                        const std::string& job_id,
                                                        absl::Duration timeout,
                                                        ChannelOptions channel) {
  channel.target = target;
  auto stub = v1::Coordinator::NewStub(MakeChannel(channel));
  v1::GetJobStatusRequest request;
  request.mutable_job()->set_job_id(job_id);
  v1::GetJobStatusResponse reply;
  RetryOptions retry;
  retry.max_attempts = 3;
  retry.call_timeout = timeout / 3;
  retry.max_backoff = absl::Milliseconds(200);
  // A closed port or a refused handshake is an answer: say so at once
  // instead of waiting out the deadline for a server that never comes.
  retry.wait_for_ready = false;
  RETURN_IF_ERROR(CallWithRetry(retry, absl::StrCat("Coordinator.GetJobStatus at ", target),
                                [&](grpc::ClientContext* ctx) {
                                  return stub->GetJobStatus(ctx, request, &reply);
                                }));
  return reply;
}

namespace {

// True when a TCP connection to "host:port" is accepted within a second.
bool Accepts(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string host = target.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (getaddrinfo(host.c_str(), target.substr(colon + 1).c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  for (addrinfo* a = found; a != nullptr && !accepted; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      accepted = poll(&p, 1, 1000) == 1 &&
                 getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return accepted;
}

}  // namespace

StatusFailure ClassifyStatusFailure(const std::string& target, const absl::Status& error) {
  if (absl::IsUnauthenticated(error)) return StatusFailure::kTokenRefused;
  if (!absl::IsUnavailable(error) && !absl::IsDeadlineExceeded(error)) return StatusFailure::kOther;
  if (!Accepts(target)) return StatusFailure::kNothingListens;
  return absl::IsUnavailable(error) ? StatusFailure::kTlsRefused : StatusFailure::kNoAnswer;
}

std::string ExplainStatusFailure(const std::string& target, const absl::Status& error, bool tls,
                                 const std::string& run_dir) {
  const std::string detail = absl::StrCat(" (", error.message(), ")");
  switch (ClassifyStatusFailure(target, error)) {
    case StatusFailure::kNothingListens: {
      auto prior = run_dir.empty() ? absl::StatusOr<PriorRun>(PriorRun())
                                   : InspectRunDir(run_dir, "");
      if (prior.ok() && prior->kind == PriorRun::kFinished) {
        return absl::StrCat("job finished: its coordinator at ", target, " has exited; ",
                            prior->result.empty() ? "no result was recorded" : prior->result,
                            " (", run_dir, ")");
      }
      if (prior.ok() && prior->kind == PriorRun::kInterrupted) {
        return absl::StrCat("nothing listens at ", target, ": the job in ", run_dir,
                            " stopped at step ", prior->step,
                            " without finishing; the same tandem local command with --run_dir ",
                            run_dir, " resumes it");
      }
      return absl::StrCat("nothing listens at ", target,
                          " (connection refused): the job's coordinator has exited, or the "
                          "address is wrong (tandem local prints it)");
    }
    case StatusFailure::kTlsRefused:
      return tls ? absl::StrCat("TLS refused: ", target,
                                " accepts connections but not this TLS handshake", detail,
                                "; a job started without --tls needs no --tls_* flags, a --tls "
                                "job the files and --tls_server_name tandem local printed")
                 : absl::StrCat("TLS refused: ", target,
                                " accepts connections but not plain text", detail,
                                "; a --tls job needs --tls_ca, --tls_cert, --tls_key and "
                                "--tls_server_name (tandem local prints them)");
    case StatusFailure::kTokenRefused:
      return absl::StrCat("token refused by the coordinator at ", target, detail,
                          ": pass --token_file with this job's token (tandem local: "
                          "RUN_DIR/token)");
    case StatusFailure::kNoAnswer:
      return absl::StrCat("the coordinator at ", target,
                          " accepts connections but did not answer in time", detail,
                          ": it is stopped or overloaded; try again or raise --timeout_seconds");
    case StatusFailure::kOther:
      break;
  }
  return std::string(error.message());
}

std::unique_ptr<JobWatch> JobWatch::Create(const std::string& target, const std::string& job_id,
                                           const std::string& token) {
  std::unique_ptr<JobWatch> w(new JobWatch());
  w->stub_ = v1::Coordinator::NewStub(MakeChannel({.target = target, .auth_token = token}));
  w->job_id_ = job_id;
  return w;
}

bool JobWatch::Fetch(absl::Duration timeout, v1::GetJobStatusResponse* reply) {
  v1::GetJobStatusRequest request;
  request.mutable_job()->set_job_id(job_id_);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return stub_->GetJobStatus(&ctx, request, reply).ok();
}

bool JobWatch::IgnoreEarlierGenerations(absl::Duration timeout) {
  v1::GetJobStatusResponse reply;
  if (!Fetch(timeout, &reply)) return false;
  ignore_through_ = reply.generation();
  return true;
}

std::vector<v1::LostWorker> JobWatch::NewlyLost(absl::Duration timeout) {
  v1::GetJobStatusResponse reply;
  std::vector<v1::LostWorker> out;
  if (!Fetch(timeout, &reply)) return out;
  stragglers_.assign(reply.stragglers().begin(), reply.stragglers().end());
  for (const v1::LostWorker& l : reply.lost()) {
    if (l.generation() <= ignore_through_) continue;
    if (seen_.insert({l.worker_id(), l.generation()}).second) out.push_back(l);
  }
  return out;
}

std::vector<std::string> JobWatch::StragglerChanges() {
  std::vector<std::string> lines;
  std::map<std::string, v1::Straggler> now;
  for (const v1::Straggler& s : stragglers_) {
    auto before = named_.find(s.worker_id());
    if (before == named_.end() || before->second.since_unix_millis() != s.since_unix_millis()) {
      lines.push_back(s.message());
    }
    now[s.worker_id()] = s;
  }
  for (const auto& [id, s] : named_) {
    if (now.count(id) == 0) {
      lines.push_back(absl::StrCat("straggler cleared: rank ", s.rank(), " (", id, ")"));
    }
  }
  named_ = std::move(now);
  return lines;
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
  // The coordinator sets a global batch only under --batch auto; otherwise
  // the workers' reports carry the one they train with.
  int64_t global_batch = s.global_batch_size();
  for (const v1::WorkerStatus& w : s.workers()) {
    if (global_batch == 0) global_batch = w.progress().global_batch();
  }
  std::string out = absl::StrCat(
      "state ", v1::GetJobStatusResponse::State_Name(s.state()), "  generation ", s.generation(),
      "  world ", s.world_size(), "  restarts ", s.restarts(), "  global batch ",
      global_batch > 0 ? absl::StrCat(global_batch) : std::string("(not reported yet)"), "\n");
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
  if (s.state() == v1::GetJobStatusResponse::RUNNING && s.stragglers_size() == 0) {
    absl::StrAppend(&out, "stragglers: none\n");
  }
  for (const v1::Straggler& x : s.stragglers()) absl::StrAppend(&out, x.message(), "\n");
  return out;
}

}  // namespace cli
}  // namespace tandem
