// `tandem status`: asks a running coordinator for its job status and formats
// it for a terminal.
//
//   ASSIGN_OR_RETURN(v1::GetJobStatusResponse s,
//                    FetchJobStatus("127.0.0.1:7000", "local", absl::Seconds(5)));
//   std::cout << FormatJobStatus(s);
//
// Thread-safe. FetchJobStatus fails with UNAVAILABLE / DEADLINE_EXCEEDED
// naming the address when no coordinator answers within `timeout` (bounded
// retries, never a hang).
#ifndef TANDEM_TOOLS_TANDEM_JOB_STATUS_H_
#define TANDEM_TOOLS_TANDEM_JOB_STATUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace tandem {
namespace cli {

absl::StatusOr<v1::GetJobStatusResponse> FetchJobStatus(const std::string& target,
                                                        const std::string& job_id,
                                                        absl::Duration timeout);

// Several lines: state, generation, world size, restarts, the last committed
// checkpoint, the coordinator's message, then one line per worker (rank, id,
// step, epoch, loss, samples/s, metrics address).
std::string FormatJobStatus(const v1::GetJobStatusResponse& status);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_JOB_STATUS_H_
