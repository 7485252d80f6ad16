// HttpExposer: serves one text document (the Prometheus exposition of a
// registry) at GET /metrics over HTTP/1.0 from one background thread.
//
// Why not prometheus-cpp's Exposer: it runs civetweb, whose worker threads
// are created with a fixed small stack; a process that links cuBLAS (every
// GPU worker) has a static TLS block larger than that stack, so civetweb
// cannot start a thread ("null context when constructing CivetServer").
// This server uses std::thread (default stack) and is all a scrape needs.
//
// Thread-safe; the render callback is called on the server thread for every
// scrape and must be thread-safe itself. Start fails with UNAVAILABLE naming
// the address when it cannot bind; the destructor stops the thread.
#ifndef TANDEM_COMMON_METRICS_HTTP_EXPOSER_H_
#define TANDEM_COMMON_METRICS_HTTP_EXPOSER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace tandem {

class HttpExposer {
 public:
  using Render = std::function<std::string()>;

  // Binds host:port (port 0 = any free port) and starts serving.
  static absl::StatusOr<std::unique_ptr<HttpExposer>> Start(const std::string& host, int port,
                                                            Render render);
  ~HttpExposer();
  HttpExposer(const HttpExposer&) = delete;
  HttpExposer& operator=(const HttpExposer&) = delete;

  int port() const { return port_; }

 private:
  HttpExposer(int fd, int port, Render render);
  void Serve();
  void Answer(int client);

  const int fd_;
  const int port_;
  const Render render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_HTTP_EXPOSER_H_
