// The data server's Prometheus metrics (DESIGN.md names), created once and
// shared by every stream.
//
//   tandem_data_batches_served_total, tandem_data_bytes_served_total,
//   tandem_data_queue_depth (packed batches waiting to be sent, all streams),
//   tandem_data_open_streams, tandem_data_decode_seconds_total,
//   tandem_data_stream_errors_total.
//
// Thread-safe (prometheus handles are atomic). The handles belong to the
// Metrics object, which must outlive this struct. Create fails like
// Metrics::Counter (INVALID_ARGUMENT on a name clash).
#ifndef TANDEM_SERVICES_DATASERVER_SERVER_METRICS_H_
#define TANDEM_SERVICES_DATASERVER_SERVER_METRICS_H_

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"

namespace tandem {
namespace dataserver {

struct ServerMetrics {
  prometheus::Counter* batches_served = nullptr;
  prometheus::Counter* bytes_served = nullptr;
  prometheus::Gauge* queue_depth = nullptr;
  prometheus::Gauge* open_streams = nullptr;
  prometheus::Counter* decode_seconds = nullptr;
  prometheus::Counter* stream_errors = nullptr;

  static absl::StatusOr<ServerMetrics> Create(Metrics* metrics);
};

}  // namespace dataserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_DATASERVER_SERVER_METRICS_H_
