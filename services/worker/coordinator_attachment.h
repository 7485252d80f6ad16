// CoordinatorAttachment: holds this worker process's Coordinator.Attach call
// open for as long as it lives, so the coordinator sees the call end when the
// process dies (the kernel closes its sockets) and confirms the death at
// once instead of after missed heartbeats or the rendezvous's settle time
// (services/coordinator/coordinator_core.h, "Confirmed deaths"). A stopped
// or slow process keeps the call open: it is no evidence of a hang.
//
//   CoordinatorAttachment attachment(stub.get(), request);  // opens it
//   ...                                                     // the whole run
//   // destructor: cancels the call (after Leave, so it counts as nothing)
//
// When the call ends while the process lives (the coordinator restarted,
// a connection reset), it is opened again after a backoff of 50 ms doubling
// to 1 s. Thread-safe; owns one thread; borrows the stub, which must
// outlive it. Never fails: an attachment that cannot open only leaves the
// coordinator without this evidence (heartbeats still count).
#ifndef TANDEM_SERVICES_WORKER_COORDINATOR_ATTACHMENT_H_
#define TANDEM_SERVICES_WORKER_COORDINATOR_ATTACHMENT_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator.grpc.pb.h"

namespace tandem {
namespace worker {

class CoordinatorAttachment {
 public:
  CoordinatorAttachment(v1::Coordinator::Stub* stub, v1::AttachRequest request);
  ~CoordinatorAttachment();

  CoordinatorAttachment(const CoordinatorAttachment&) = delete;
  CoordinatorAttachment& operator=(const CoordinatorAttachment&) = delete;

  // How many times the coordinator registered the call (its first reply).
  int64_t registrations() const;

 private:
  void Loop();

  v1::Coordinator::Stub* const stub_;
  const v1::AttachRequest request_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open call, to cancel
  int64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_COORDINATOR_ATTACHMENT_H_
