#include "common/data/dataset_info_client.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/dataserver.grpc.pb.h"

namespace tandem {
namespace data {

absl::StatusOr<v1::DatasetInfo> FetchDatasetInfo(const std::vector<std::string>& servers,
                                                 const std::string& dataset,
                                                 const RetryOptions& retry) {
  if (servers.empty()) {
    return absl::InvalidArgumentError("no data server given to ask for dataset " + dataset);
  }
  absl::Status last;
  for (const std::string& server : servers) {
    auto stub = v1::DataServer::NewStub(MakeChannel({.target = server}));
    v1::ListDatasetsResponse response;
    last = CallWithRetry(retry, absl::StrCat("DataServer.ListDatasets(", server, ")"),
                         [&](grpc::ClientContext* ctx) {
                           response.Clear();
                           return stub->ListDatasets(ctx, {}, &response);
                         });
    if (!last.ok()) continue;
    std::vector<std::string> names;
    for (const v1::DatasetInfo& info : response.datasets()) {
      if (info.name() == dataset) return info;
      names.push_back(info.name());
    }
    return absl::NotFoundError(absl::StrCat("data server ", server, " has no dataset '", dataset,
                                            "'; it serves: ", absl::StrJoin(names, ", ")));
  }
  return last;
}

}  // namespace data
}  // namespace tandem
