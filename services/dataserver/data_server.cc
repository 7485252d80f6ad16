#include "services/dataserver/data_server.h"

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace dataserver {

absl::StatusOr<std::pair<std::string, std::string>> ParseDatasetSpec(
    const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos && !spec.empty()) {
    return std::make_pair(spec, spec);  // a bare path names itself
  }
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dataset '", spec, "' must look like name=path (e.g. "
        "fashion-mnist/train=/usr/share/datasets/fashion-mnist/train) or be a "
        "path, served under its own name"));
  }
  return std::make_pair(spec.substr(0, eq), spec.substr(eq + 1));
}

absl::StatusOr<std::unique_ptr<DataServer>> DataServer::Start(
    const DataServerOptions& options) {
  if (options.datasets.empty()) {
    return absl::InvalidArgumentError(
        "no datasets: give at least one --dataset name=path");
  }
  std::vector<std::unique_ptr<data::Dataset>> datasets;
  for (const auto& [name, path] : options.datasets) {
    ASSIGN_OR_RETURN(auto ds, data::OpenDataset(name, path));
    datasets.push_back(std::move(ds));
  }
  std::unique_ptr<DataServer> server(new DataServer());
  MetricsOptions metrics_options;
  metrics_options.port = options.metrics_port;
  metrics_options.labels = {{"service", "dataserver"}};
  ASSIGN_OR_RETURN(server->metrics_, Metrics::Create(metrics_options));
  ASSIGN_OR_RETURN(server->service_,
                   DataService::Create(options.service, std::move(datasets),
                                       server->metrics_.get()));
  ServerOptions rpc_options;
  rpc_options.host = options.host;
  rpc_options.port = options.port;
  ASSIGN_OR_RETURN(server->rpc_,
                   RpcServer::Start(rpc_options, {server->service_.get()}));
  return server;
}

DataServer::~DataServer() {
  if (rpc_ != nullptr) rpc_->Shutdown();
}

}  // namespace dataserver
}  // namespace tandem
