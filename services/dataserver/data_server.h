// The data-shard server process as a library: opens the datasets, starts
// the /metrics exposer and the gRPC server. main.cc only fills the Options;
// tests and benchmarks run the same server in-process.
//
//   DataServerOptions options;
//   options.datasets = {{"fashion-mnist/train",
//                        "/usr/share/datasets/fashion-mnist/train"}};
//   ASSIGN_OR_RETURN(auto server, DataServer::Start(options));
//   LOG(INFO) << "serving on " << server->address();
//   server->Wait();
//
// Thread-safe after Start. Start fails with the first dataset's error
// (NOT_FOUND for a missing file, DATA_LOSS naming a corrupt file's offset),
// UNAVAILABLE when a port is taken, INVALID_ARGUMENT for bad options.
#ifndef TANDEM_SERVICES_DATASERVER_DATA_SERVER_H_
#define TANDEM_SERVICES_DATASERVER_DATA_SERVER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"
#include "common/rpc/server.h"
#include "services/dataserver/data_service.h"

namespace tandem {
namespace dataserver {

struct DataServerOptions {
  // (name, path) pairs; path as OpenDataset takes it.
  std::vector<std::pair<std::string, std::string>> datasets;
  std::string host = "127.0.0.1";  // "0.0.0.0" to serve other machines
  int port = 0;                    // 0 = any free port
  int metrics_port = -1;           // -1 = no /metrics; 0 = any free port
  DataServiceOptions service;
};

// Parses "name=path" (the --dataset flag), or a bare "path" served under
// the name "path" (what `tandem local --dataset=DIR` and workers given a
// directory ask for); INVALID_ARGUMENT for "", "=path" or "name=".
absl::StatusOr<std::pair<std::string, std::string>> ParseDatasetSpec(
    const std::string& spec);

class DataServer {
 public:
  static absl::StatusOr<std::unique_ptr<DataServer>> Start(
      const DataServerOptions& options);
  ~DataServer();

  int port() const { return rpc_->port(); }
  std::string address() const { return rpc_->address(); }
  int metrics_port() const { return metrics_->port(); }
  Metrics* metrics() { return metrics_.get(); }

  void Shutdown() { rpc_->Shutdown(); }
  void Wait() { rpc_->Wait(); }

 private:
  DataServer() = default;

  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<DataService> service_;
  std::unique_ptr<RpcServer> rpc_;  // declared last: stops first
};

}  // namespace dataserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_DATASERVER_DATA_SERVER_H_
