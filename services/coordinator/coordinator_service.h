// CoordinatorService: the gRPC face of CoordinatorCore (tandem.v1.Coordinator).
// Each handler only converts between the wire and the core; statuses go
// through ToGrpcStatus. A call without the job's token (when one is set) is
// UNAUTHENTICATED before it reaches the core. An Attach call holds a server
// thread for the worker's life, polling its cancellation (a sync handler
// learns of a closed connection no other way); Stop() ends them all without
// counting them as detaches. Thread-safe; borrows the core, which must
// outlive it.
#ifndef TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
#define TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_

#include <string>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/coordinator.grpc.pb.h"
#include "services/coordinator/coordinator_core.h"

namespace tandem {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  // Joins wait at most `max_join_wait` (or the client's deadline if sooner).
  // Every call must carry `auth_token` (common/rpc/auth.h); "" = no check.
  CoordinatorService(CoordinatorCore* core, absl::Duration max_join_wait,
                     std::string auth_token = "")
      : core_(core), max_join_wait_(max_join_wait), auth_token_(std::move(auth_token)) {}

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                    v1::JoinResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::Status ReportFailure(grpc::ServerContext* ctx, const v1::ReportFailureRequest* req,
                             v1::ReportFailureResponse* resp) override;
  grpc::Status Leave(grpc::ServerContext* ctx, const v1::LeaveRequest* req,
                     v1::LeaveResponse* resp) override;
  grpc::Status KvSet(grpc::ServerContext* ctx, const v1::KvSetRequest* req,
                     v1::KvSetResponse* resp) override;
  grpc::Status KvGet(grpc::ServerContext* ctx, const v1::KvGetRequest* req,
                     v1::KvGetResponse* resp) override;
  grpc::Status KvAdd(grpc::ServerContext* ctx, const v1::KvAddRequest* req,
                     v1::KvAddResponse* resp) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext* ctx, const v1::CommitCheckpointRequest* req,
                                v1::CommitCheckpointResponse* resp) override;
  grpc::Status GetJobStatus(grpc::ServerContext* ctx, const v1::GetJobStatusRequest* req,
                            v1::GetJobStatusResponse* resp) override;
  grpc::Status ReportShardServer(grpc::ServerContext* ctx,
                                 const v1::ReportShardServerRequest* req,
                                 v1::ReportShardServerResponse* resp) override;
  grpc::Status Clock(grpc::ServerContext* ctx, const v1::ClockRequest* req,
                     v1::ClockResponse* resp) override;
  grpc::Status Attach(grpc::ServerContext* ctx, const v1::AttachRequest* req,
                      grpc::ServerWriter<v1::AttachResponse>* writer) override;

  // Ends every Attach call (the server is shutting down). Idempotent.
  void Stop() {
    if (!stopping_.HasBeenNotified()) stopping_.Notify();
  }

 private:
  CoordinatorCore* core_;
  absl::Duration max_join_wait_;
  const std::string auth_token_;
  absl::Notification stopping_;
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
