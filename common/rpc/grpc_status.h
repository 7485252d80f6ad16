// The one place where absl::Status and grpc::Status are converted. Codes map
// one to one (both follow google.rpc.Code); messages are kept verbatim.
// Thread-safe (pure functions).
#ifndef TANDEM_COMMON_RPC_GRPC_STATUS_H_
#define TANDEM_COMMON_RPC_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace tandem {

grpc::Status ToGrpcStatus(const absl::Status& status);

// `context` (e.g. "Coordinator.Join to 10.0.0.1:7000"), when given, prefixes
// the message so errors say which call failed.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context = "");

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_GRPC_STATUS_H_
