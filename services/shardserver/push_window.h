// The shard server's HTTP/2 window for incoming pushes from the
// environment: TANDEM_SHARD_PUSH_WINDOW_KB (docs/user-guide.md), read by
// main.cc only (ShardServerOptions::flow_window_bytes holds the result).
//
//   ASSIGN_OR_RETURN(options.flow_window_bytes,
//                    PushWindowBytes(std::getenv("TANDEM_SHARD_PUSH_WINDOW_KB"),
//                                    options.flow_window_bytes));
//
// Unset or empty: `default_bytes`. Otherwise a whole number of KiB in
// 0..1048576 (0 = gRPC's auto-tuned window); anything else is
// INVALID_ARGUMENT with a message naming the variable, the value and what
// is accepted. Pure function, thread-safe.
#ifndef TANDEM_SERVICES_SHARDSERVER_PUSH_WINDOW_H_
#define TANDEM_SERVICES_SHARDSERVER_PUSH_WINDOW_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem {
namespace shardserver {

inline constexpr char kPushWindowEnv[] = "TANDEM_SHARD_PUSH_WINDOW_KB";

absl::StatusOr<int> PushWindowBytes(const char* env_value, int default_bytes);

// One line for the log: "push window 128 KiB (TANDEM_SHARD_PUSH_WINDOW_KB)",
// or "push window auto-tuned by gRPC (...)" for 0.
std::string DescribePushWindow(int bytes);

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_PUSH_WINDOW_H_
