#include "services/dataserver/server_metrics.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace dataserver {

absl::StatusOr<ServerMetrics> ServerMetrics::Create(Metrics* m) {
  ServerMetrics s;
  ASSIGN_OR_RETURN(s.batches_served,
                   m->Counter("tandem_data_batches_served_total",
                              "Batches (one rank's slice each) sent to clients."));
  ASSIGN_OR_RETURN(s.bytes_served,
                   m->Counter("tandem_data_bytes_served_total",
                              "Feature and label bytes sent to clients."));
  ASSIGN_OR_RETURN(s.queue_depth,
                   m->Gauge("tandem_data_queue_depth",
                            "Packed batches waiting to be sent, all streams."));
  ASSIGN_OR_RETURN(s.open_streams,
                   m->Gauge("tandem_data_open_streams", "StreamBatches calls in progress."));
  ASSIGN_OR_RETURN(s.decode_seconds,
                   m->Counter("tandem_data_decode_seconds_total",
                              "Thread-seconds spent reading and packing batches."));
  ASSIGN_OR_RETURN(s.stream_errors,
                   m->Counter("tandem_data_stream_errors_total",
                              "Streams that ended with an error status."));
  return s;
}

}  // namespace dataserver
}  // namespace tandem
