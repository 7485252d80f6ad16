// CoordinatorService: the gRPC face of CoordinatorCore (tandem.v1.Coordinator).
// Each handler only converts between the wire and the core; statuses go
// through ToGrpcStatus. A call without the job's token (when one is set) is
// UNAUTHENTICATED before it reaches the core.
//
// Attach is the one callback-API method (a ServerWriteReactor, see
// coordinator_service.cc): an open call holds no server thread and is not
// polled; gRPC reports the worker's connection closing (OnCancel), and the
// core's Detach runs exactly once per registered call, when it ends. The
// other methods are sync handlers. Stop() ends every Attach call without
// counting it as a detach (the coordinator is going away, not the worker).
//
// Thread-safe; borrows the core, which must outlive it. The destructor
// ends every Attach call and waits until gRPC has finished with each.
#ifndef TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
#define TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_callback.h"
#include "proto/coordinator.grpc.pb.h"
#include "services/coordinator/coordinator_core.h"

namespace tandem {

class CoordinatorService final
    : public v1::Coordinator::WithCallbackMethod_Attach<v1::Coordinator::Service> {
 public:
  // Joins wait at most `max_join_wait` (or the client's deadline if sooner).
  // Every call must carry `auth_token` (common/rpc/auth.h); "" = no check.
  CoordinatorService(CoordinatorCore* core, absl::Duration max_join_wait,
                     std::string auth_token = "")
      : core_(core), max_join_wait_(max_join_wait), auth_token_(std::move(auth_token)) {}
  ~CoordinatorService() override;
  CoordinatorService(const CoordinatorService&) = delete;
  CoordinatorService& operator=(const CoordinatorService&) = delete;

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
  // Returns the call's reactor; gRPC owns it until its OnDone.
  grpc::ServerWriteReactor<v1::AttachResponse>* Attach(grpc::CallbackServerContext* ctx,
                                                       const v1::AttachRequest* req) override;

  // Ends every Attach call with UNAVAILABLE (the server is shutting down)
  // and every later one at once. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(attach_mu_);

  // Attach calls gRPC has not finished with yet (tests; a future gauge).
  int open_attach_calls() const ABSL_LOCKS_EXCLUDED(attach_mu_);

 private:
  class AttachCall;  // one Attach call's reactor (coordinator_service.cc)

  CoordinatorCore* core_;
  absl::Duration max_join_wait_;
  const std::string auth_token_;
  mutable absl::Mutex attach_mu_;
  bool stopping_ ABSL_GUARDED_BY(attach_mu_) = false;
  // Every call from its handler to its OnDone; Stop() ends them.
  absl::flat_hash_set<AttachCall*> attach_calls_ ABSL_GUARDED_BY(attach_mu_);
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVICE_H_
