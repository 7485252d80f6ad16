#include "services/worker/coordinator_attachment.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tandem {
namespace worker {

CoordinatorAttachment::CoordinatorAttachment(v1::Coordinator::Stub* stub,
                                             v1::AttachRequest request)
    : stub_(stub), request_(std::move(request)) {
  thread_ = std::thread([this] { Loop(); });
}

CoordinatorAttachment::~CoordinatorAttachment() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (call_ != nullptr) call_->TryCancel();
  }
  thread_.join();
}

int64_t CoordinatorAttachment::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

void CoordinatorAttachment::Loop() {
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    grpc::ClientContext ctx;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      call_ = &ctx;
    }
    std::unique_ptr<grpc::ClientReader<v1::AttachResponse>> reader =
        stub_->Attach(&ctx, request_);
    v1::AttachResponse reply;
    // Blocks for the process's life: the coordinator answers once and then
    // only ends the call when it shuts down.
    while (reader->Read(&reply)) {
      absl::MutexLock lock(&mu_);
      ++registrations_;
      backoff = absl::Milliseconds(50);
    }
    (void)reader->Finish();  // why it ended matters not: open it again
    absl::MutexLock lock(&mu_);
    call_ = nullptr;
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

}  // namespace worker
}  // namespace tandem
