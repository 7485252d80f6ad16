#include "services/coordinator/coordinator_service.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "common/trace/clock.h"

namespace tandem {
namespace {

// Copies a StatusOr's value into the reply, or returns its error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* out) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *out = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status CoordinatorService::Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                                      v1::JoinResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  absl::Duration wait = max_join_wait_;
  const auto deadline = ctx->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    wait = std::min(wait, absl::FromChrono(deadline) - absl::Now() - absl::Milliseconds(50));
  }
  return Reply(core_->Join(*req, std::max(wait, absl::ZeroDuration())), resp);
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                           v1::HeartbeatResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  return Reply(core_->Heartbeat(*req), resp);
}

grpc::Status CoordinatorService::ReportFailure(grpc::ServerContext* ctx,
                                               const v1::ReportFailureRequest* req,
                                               v1::ReportFailureResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  return Reply(core_->ReportFailure(*req), resp);
}

grpc::Status CoordinatorService::Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req,
                                       v1::LeaveResponse*) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(core_->Leave(*req));
}

grpc::Status CoordinatorService::KvSet(grpc::ServerContext* ctx, const v1::KvSetRequest* req,
                                       v1::KvSetResponse*) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(core_->KvSet(*req));
}

grpc::Status CoordinatorService::KvGet(grpc::ServerContext* ctx, const v1::KvGetRequest* req,
                                       v1::KvGetResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  // Never wait past the caller's deadline (or max_join_wait): a huge or
  // negative timeout_ms must not pin a server thread.
  absl::Duration wait = std::min(max_join_wait_, absl::Milliseconds(std::max<int64_t>(0, req->timeout_ms())));
  const auto deadline = ctx->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    wait = std::min(wait, absl::FromChrono(deadline) - absl::Now());
  }
  v1::KvGetRequest bounded = *req;
  bounded.set_timeout_ms(std::max<int64_t>(0, absl::ToInt64Milliseconds(wait)));
  return Reply(core_->KvGet(bounded), resp);
}

grpc::Status CoordinatorService::KvAdd(grpc::ServerContext* ctx, const v1::KvAddRequest* req,
                                       v1::KvAddResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  absl::StatusOr<int64_t> v = core_->KvAdd(*req);
  if (!v.ok()) return ToGrpcStatus(v.status());
  resp->set_value(*v);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitCheckpoint(grpc::ServerContext* ctx,
                                                  const v1::CommitCheckpointRequest* req,
                                                  v1::CommitCheckpointResponse*) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(core_->CommitCheckpoint(*req));
}

grpc::Status CoordinatorService::GetJobStatus(grpc::ServerContext* ctx,
                                              const v1::GetJobStatusRequest*,
                                              v1::GetJobStatusResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  *resp = core_->GetJobStatus();
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::ReportShardServer(grpc::ServerContext* ctx,
                                                   const v1::ReportShardServerRequest* req,
                                                   v1::ReportShardServerResponse*) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  return ToGrpcStatus(core_->ReportShardServer(*req));
}

grpc::Status CoordinatorService::Clock(grpc::ServerContext* ctx, const v1::ClockRequest*,
                                       v1::ClockResponse* resp) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  resp->set_now_ns(trace::NowNanos());
  return grpc::Status::OK;
}

// One Attach call. It ends exactly once (End): on the client's cancel or
// closed connection (OnCancel), on a failed write (the same, seen first by
// the write), on Stop(), or at once when the call is refused. Its OnDone
// detaches it from the core when it was registered and did not end by
// Stop(), so the core sees one Detach per Attach. Reactions run on gRPC's
// threads and may overlap; mu_ orders End against the first write.
class CoordinatorService::AttachCall final
    : public grpc::ServerWriteReactor<v1::AttachResponse> {
 public:
  AttachCall(CoordinatorService* service, const v1::AttachRequest& request)
      : service_(service), request_(request) {}

  // Registered with the core in `generation`: tell the worker.
  void Registered(int64_t generation) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    attached_ = true;
    if (ended_) return;  // Stop() came first: nothing to send
    reply_.set_generation(generation);
    StartWrite(&reply_);
  }

  // Finishes the call with `status` unless it has ended already; `detach`:
  // whether its end means the worker's connection closed.
  void End(grpc::Status status, bool detach) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
    detach_ = detach;
    Finish(std::move(status));
  }

  void OnWriteDone(bool ok) override {
    if (!ok) End(grpc::Status(grpc::StatusCode::CANCELLED, "attachment closed"), true);
  }
  void OnCancel() override {
    End(grpc::Status(grpc::StatusCode::CANCELLED, "attachment closed"), true);
  }
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    bool detach;
    {
      absl::MutexLock lock(&mu_);
      detach = attached_ && detach_;
    }
    // May persist the core's state (a confirmed death): a short file write
    // on gRPC's executor, once per worker process's life.
    if (detach) service_->core_->Detach(request_);
    {
      absl::MutexLock lock(&service_->attach_mu_);
      service_->attach_calls_.erase(this);
    }
    delete this;
  }

 private:
  CoordinatorService* const service_;
  const v1::AttachRequest request_;
  absl::Mutex mu_;
  v1::AttachResponse reply_ ABSL_GUARDED_BY(mu_);
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool detach_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerWriteReactor<v1::AttachResponse>* CoordinatorService::Attach(
    grpc::CallbackServerContext* ctx, const v1::AttachRequest* req) {
  auto* call = new AttachCall(this, *req);
  bool stopping;
  {
    absl::MutexLock lock(&attach_mu_);
    stopping = stopping_;
    attach_calls_.insert(call);
  }
  if (stopping) {
    call->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"),
              false);
    return call;
  }
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) {
    call->End(std::move(auth), false);
    return call;
  }
  absl::StatusOr<int64_t> generation = core_->Attach(*req);
  if (!generation.ok()) {
    call->End(ToGrpcStatus(generation.status()), false);
  } else {
    call->Registered(*generation);
  }
  return call;
}

void CoordinatorService::Stop() {
  absl::MutexLock lock(&attach_mu_);
  stopping_ = true;
  for (AttachCall* call : attach_calls_) {
    call->End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"),
              false);
  }
}

int CoordinatorService::open_attach_calls() const {
  absl::MutexLock lock(&attach_mu_);
  return static_cast<int>(attach_calls_.size());
}

CoordinatorService::~CoordinatorService() {
  Stop();
  // Each call's OnDone touches this service. A server's Shutdown waits for
  // them; a service destroyed before its server is shut down waits here.
  absl::MutexLock lock(&attach_mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(attach_mu_) { return attach_calls_.empty(); };
  attach_mu_.Await(absl::Condition(&none));
}

}  // namespace tandem
