// Asks data servers for a dataset's description (DataServer.ListDatasets).
//
//   ASSIGN_OR_RETURN(v1::DatasetInfo info,
//                    FetchDatasetInfo({"10.0.0.5:7100"}, "fortunes/train", RetryOptions{}));
//
// Thread-safe (makes its own channels per call).
#ifndef TANDEM_COMMON_DATA_DATASET_INFO_CLIENT_H_
#define TANDEM_COMMON_DATA_DATASET_INFO_CLIENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rpc/channel.h"
#include "proto/dataserver.pb.h"

namespace tandem {
namespace data {

// The DatasetInfo named `dataset` from the first of `servers` ("host:port")
// that answers ListDatasets (each tried with `retry`). NOT_FOUND listing
// the server's datasets when it has no such one; the last server's error
// when none answers; INVALID_ARGUMENT for an empty server list.
absl::StatusOr<v1::DatasetInfo> FetchDatasetInfo(const std::vector<std::string>& servers,
                                                 const std::string& dataset,
                                                 const RetryOptions& retry);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_DATASET_INFO_CLIENT_H_
