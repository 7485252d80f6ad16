#include "common/metrics/http_exposer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpExposer>> HttpExposer::Start(const std::string& host, int port,
                                                                Render render) {
  const std::string address = absl::StrCat(host, ":", port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (port < 0 || port > 65535 || ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serve /metrics on ", address, ": not an IPv4 address and port"));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // restarts; not REUSEPORT
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(
        "cannot serve /metrics on ", address, " (", std::strerror(err),
        "): the port is in use or the address is not local; choose another metrics port "
        "(0 picks a free one)"));
  }
  return std::unique_ptr<HttpExposer>(new HttpExposer(fd, ntohs(addr.sin_port), std::move(render)));
}

HttpExposer::HttpExposer(int fd, int port, Render render)
    : fd_(fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Serve(); });
}

HttpExposer::~HttpExposer() {
  stop_.store(true);
  thread_.join();
  ::close(fd_);
}

void HttpExposer::Serve() {
  while (!stop_.load()) {
    // Poll with a timeout so the destructor's stop flag is seen promptly.
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Answer(client);
    ::close(client);
  }
}

void HttpExposer::Answer(int client) {
  // Read the request head (bounded, with a short timeout per read).
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 16384) {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) return;
    ssize_t n = ::recv(client, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  const bool get_metrics = absl::StartsWith(request, "GET /metrics ") ||
                           absl::StartsWith(request, "GET /metrics?") ||
                           absl::StartsWith(request, "GET /metrics\r");
  std::string body;
  std::string status = "404 Not Found";
  std::string type = "text/plain";
  if (get_metrics) {
    body = render_();
    status = "200 OK";
    type = "text/plain; version=0.0.4; charset=utf-8";
  } else {
    body = "only GET /metrics is served here\n";
  }
  WriteAll(client, absl::StrCat("HTTP/1.0 ", status, "\r\nContent-Type: ", type,
                                "\r\nContent-Length: ", body.size(),
                                "\r\nConnection: close\r\n\r\n", body));
}

}  // namespace tandem
