#include "common/trace/coordinator_clock.h"

#include <chrono>
#include <memory>

#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "proto/coordinator.grpc.pb.h"

namespace tandem {
namespace trace {

std::function<absl::StatusOr<int64_t>()> CoordinatorClock(const std::string& address) {
  std::shared_ptr<v1::Coordinator::Stub> stub =
      v1::Coordinator::NewStub(MakeChannel({.target = address}));
  return [stub]() -> absl::StatusOr<int64_t> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
    v1::ClockRequest req;
    v1::ClockResponse resp;
    grpc::Status s = stub->Clock(&ctx, req, &resp);
    if (!s.ok()) return FromGrpcStatus(s, "Coordinator.Clock");
    return resp.now_ns();
  };
}

}  // namespace trace
}  // namespace tandem
