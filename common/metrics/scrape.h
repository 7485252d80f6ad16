// Fetches a process's /metrics text over HTTP/1.0 (what tandem's exposer
// serves): for `tandem doctor` on a live job, `tandem local` keeping the
// services' last numbers, and end-to-end tests that scrape a cluster.
//
//   ASSIGN_OR_RETURN(std::string text, ScrapeMetrics("127.0.0.1:9100", absl::Seconds(2)));
//
// `address` is "host:port" or "http://host:port[/metrics]". Thread-safe (no
// shared state). Failure: a bad address is INVALID_ARGUMENT; a host that
// does not resolve, a refused connection, a timeout or a non-200 reply is
// UNAVAILABLE naming the address.
#ifndef TANDEM_COMMON_METRICS_SCRAPE_H_
#define TANDEM_COMMON_METRICS_SCRAPE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {

absl::StatusOr<std::string> ScrapeMetrics(const std::string& address, absl::Duration timeout);

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_SCRAPE_H_
