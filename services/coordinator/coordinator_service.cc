#include "services/coordinator/coordinator_service.h"

#include <algorithm>
#include <chrono>

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

grpc::Status CoordinatorService::Attach(grpc::ServerContext* ctx, const v1::AttachRequest* req,
                                        grpc::ServerWriter<v1::AttachResponse>* writer) {
  if (grpc::Status auth = CheckCallToken(*ctx, auth_token_); !auth.ok()) return auth;
  absl::StatusOr<int64_t> generation = core_->Attach(*req);
  if (!generation.ok()) return ToGrpcStatus(generation.status());
  v1::AttachResponse registered;
  registered.set_generation(*generation);
  // How long a closed connection goes unseen: the poll below.
  constexpr absl::Duration kPoll = absl::Milliseconds(50);
  bool open = writer->Write(registered);
  while (open && !ctx->IsCancelled()) {
    if (stopping_.WaitForNotificationWithTimeout(kPoll)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
    }
  }
  core_->Detach(*req);
  return grpc::Status(grpc::StatusCode::CANCELLED, "attachment closed");
}

}  // namespace tandem
