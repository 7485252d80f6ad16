#include "common/metrics/scrape.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tandem {

absl::StatusOr<std::string> ScrapeMetrics(const std::string& address, absl::Duration timeout) {
  absl::string_view a = address;
  absl::ConsumePrefix(&a, "http://");
  std::string path = "/metrics";
  if (const size_t slash = a.find('/'); slash != absl::string_view::npos) {
    path = std::string(a.substr(slash));
    a = a.substr(0, slash);
  }
  const size_t colon = a.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(a.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port (e.g. 127.0.0.1:9100)"));
  }
  const std::string host(a.substr(0, colon));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics at ", address, ": cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  const timeval tv = absl::ToTimeval(timeout);
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("metrics at ", address, ": ", error));
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, "\r\n\r\n");
  std::string reply;
  bool ok = send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size());
  char buf[16384];
  ssize_t n = 0;
  while (ok && (n = recv(fd, buf, sizeof(buf), 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  if (n < 0) ok = false;
  const int err = errno;
  close(fd);
  if (!ok) {
    return absl::UnavailableError(
        absl::StrCat("metrics at ", address, ": ", err == EAGAIN ? "timed out" : std::strerror(err)));
  }
  const size_t body = reply.find("\r\n\r\n");
  if (!absl::StartsWith(reply, "HTTP/1.") || reply.size() < 12 || reply.substr(9, 3) != "200" ||
      body == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("metrics at ", address, ": not a 200 reply: '",
                                               reply.substr(0, reply.find('\r')), "'"));
  }
  return reply.substr(body + 4);
}

}  // namespace tandem
