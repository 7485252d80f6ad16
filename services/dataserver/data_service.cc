#include "services/dataserver/data_service.h"

#include "common/rpc/auth.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "common/status/status_macros.h"
#include "services/dataserver/batch_stream.h"

namespace tandem {
namespace dataserver {

absl::StatusOr<std::unique_ptr<DataService>> DataService::Create(
    const DataServiceOptions& options,
    std::vector<std::unique_ptr<data::Dataset>> datasets, Metrics* metrics) {
  if (options.prefetch_depth < 1 || options.decode_threads < 1 ||
      options.max_streams < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefetch_depth (", options.prefetch_depth, "), decode_threads (",
        options.decode_threads, ") and max_streams (", options.max_streams,
        ") must all be >= 1"));
  }
  std::map<std::string, std::unique_ptr<data::Dataset>> by_name;
  for (auto& ds : datasets) {
    const std::string name = ds->info().name();
    if (!by_name.emplace(name, std::move(ds)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset name '", name, "' given twice"));
    }
  }
  std::optional<ServerMetrics> m;
  if (metrics != nullptr) {
    ASSIGN_OR_RETURN(m, ServerMetrics::Create(metrics));
  }
  return std::unique_ptr<DataService>(
      new DataService(options, std::move(by_name), m));
}

DataService::DataService(const DataServiceOptions& options,
                         std::map<std::string, std::unique_ptr<data::Dataset>> datasets,
                         std::optional<ServerMetrics> metrics)
    : options_(options),
      datasets_(std::move(datasets)),
      metrics_(metrics),
      pool_(options.decode_threads) {}

grpc::Status DataService::ListDatasets(grpc::ServerContext* context,
                                       const v1::ListDatasetsRequest*,
                                       v1::ListDatasetsResponse* response) {
  if (grpc::Status auth = CheckCallToken(*context, options_.auth_token); !auth.ok()) return auth;
  for (const auto& [name, ds] : datasets_) *response->add_datasets() = ds->info();
  return grpc::Status::OK;
}

grpc::Status DataService::StreamBatches(grpc::ServerContext* context,
                                        const v1::StreamBatchesRequest* request,
                                        grpc::ServerWriter<v1::Batch>* writer) {
  if (grpc::Status auth = CheckCallToken(*context, options_.auth_token); !auth.ok()) return auth;
  if (open_streams_.fetch_add(1) >= options_.max_streams) {
    open_streams_.fetch_sub(1);
    return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "the data server already serves ", options_.max_streams,
        " streams (--max_streams); add a server or raise the limit")));
  }
  if (metrics_) metrics_->open_streams->Increment();
  const absl::Status status = Stream(context, *request, writer);
  if (metrics_) {
    metrics_->open_streams->Decrement();
    if (!status.ok() && !absl::IsCancelled(status)) {
      metrics_->stream_errors->Increment();
    }
  }
  open_streams_.fetch_sub(1);
  return ToGrpcStatus(status);
}

absl::Status DataService::Stream(grpc::ServerContext* context,
                                 const v1::StreamBatchesRequest& request,
                                 grpc::ServerWriter<v1::Batch>* writer) {
  auto it = datasets_.find(request.dataset());
  if (it == datasets_.end()) {
    std::string known;
    for (const auto& [name, ds] : datasets_) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", name);
    }
    return absl::NotFoundError(absl::StrCat("unknown dataset '",
                                            request.dataset(),
                                            "'; this server has: ", known));
  }
  BatchStreamOptions stream_options;
  stream_options.prefetch_depth = options_.prefetch_depth;
  stream_options.read_delay = options_.read_delay;
  stream_options.metrics = metrics_ ? &*metrics_ : nullptr;
  ASSIGN_OR_RETURN(auto stream, BatchStream::Create(it->second.get(), request,
                                                    &pool_, stream_options));
  while (!context->IsCancelled()) {
    absl::StatusOr<const v1::Batch*> batch = stream->Next();
    if (absl::IsOutOfRange(batch.status())) return absl::OkStatus();
    RETURN_IF_ERROR(batch.status());
    if (!writer->Write(**batch)) {
      return absl::CancelledError("client went away");  // not sent anyway
    }
    if (metrics_) {
      metrics_->batches_served->Increment();
      metrics_->bytes_served->Increment(
          static_cast<double>((*batch)->features().data().size() +
                              (*batch)->labels().data().size()));
    }
    stream->Release();
  }
  return absl::CancelledError("stream cancelled by the client");
}

}  // namespace dataserver
}  // namespace tandem
