// The tandem.v1.DataServer gRPC service: a thin handler over Dataset and
// BatchStream. Each StreamBatches call gets its own BatchStream (its own
// bounded ring of prefetch_depth batches) packed on one shared thread pool;
// one message is one rank's whole slice of a global batch.
//
//   std::vector<std::unique_ptr<Dataset>> datasets = ...;
//   ASSIGN_OR_RETURN(auto service, DataService::Create(options,
//                                     std::move(datasets), metrics.get()));
//   ASSIGN_OR_RETURN(auto server, RpcServer::Start({}, {service.get()}));
//
// Thread-safe (gRPC calls it from many threads). Owns the datasets and the
// pool; `metrics` may be null and must otherwise outlive the service.
// Errors, per call (other streams keep going): NOT_FOUND unknown dataset,
// INVALID_ARGUMENT bad rank/world/batch/cursor, RESOURCE_EXHAUSTED beyond
// max_streams, DATA_LOSS when a record is corrupt (file and offset named).
#ifndef TANDEM_SERVICES_DATASERVER_DATA_SERVICE_H_
#define TANDEM_SERVICES_DATASERVER_DATA_SERVICE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"
#include "proto/dataserver.grpc.pb.h"
#include "common/data/dataset.h"
#include "services/dataserver/server_metrics.h"
#include "services/dataserver/thread_pool.h"

namespace tandem {
namespace dataserver {

struct DataServiceOptions {
  int prefetch_depth = 4;   // batches packed ahead per stream
  int decode_threads = 4;   // shared packing threads
  int max_streams = 256;    // concurrent StreamBatches calls
  // Simulated slow storage (BatchStreamOptions::read_delay); zero = off.
  absl::Duration read_delay = absl::ZeroDuration();
  // The job's token every call must carry (common/rpc/auth.h); "" = none.
  std::string auth_token;
};

class DataService final : public v1::DataServer::Service {
 public:
  // INVALID_ARGUMENT for duplicate dataset names or bad options.
  static absl::StatusOr<std::unique_ptr<DataService>> Create(
      const DataServiceOptions& options,
      std::vector<std::unique_ptr<data::Dataset>> datasets, Metrics* metrics);

  grpc::Status ListDatasets(grpc::ServerContext* context,
                            const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status StreamBatches(grpc::ServerContext* context,
                             const v1::StreamBatchesRequest* request,
                             grpc::ServerWriter<v1::Batch>* writer) override;

 private:
  DataService(const DataServiceOptions& options,
              std::map<std::string, std::unique_ptr<data::Dataset>> datasets,
              std::optional<ServerMetrics> metrics);
  absl::Status Stream(grpc::ServerContext* context,
                      const v1::StreamBatchesRequest& request,
                      grpc::ServerWriter<v1::Batch>* writer);

  const DataServiceOptions options_;
  const std::map<std::string, std::unique_ptr<data::Dataset>> datasets_;
  const std::optional<ServerMetrics> metrics_;
  std::atomic<int> open_streams_{0};
  ThreadPool pool_;  // last: joined before the datasets go away
};

}  // namespace dataserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_DATASERVER_DATA_SERVICE_H_
