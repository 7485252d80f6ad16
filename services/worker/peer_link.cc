#include "services/worker/peer_link.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
namespace {

// One rank's address in the all-gather.
struct Address {
  int32_t port = 0;
  char host[60] = {0};
};

bool WriteFull(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadFull(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Reads and discards `n` bytes, folding them into nothing (a refused frame).
bool Skip(int fd, uint64_t n) {
  char buf[1 << 14];
  while (n > 0) {
    const size_t k = n < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf);
    if (!ReadFull(fd, buf, k)) return false;
    n -= k;
  }
  return true;
}

absl::StatusOr<int> Listen(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("peer replica socket: ", strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 4) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string err = strerror(errno);
    ::close(fd);
    return absl::InternalError(absl::StrCat("peer replica listener: ", err));
  }
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PeerLink>> PeerLink::Start(Communicator& ctl,
                                                          const PeerLinkOptions& options,
                                                          PeerSink* sink) {
  Address mine;
  ASSIGN_OR_RETURN(const int fd, Listen(&mine.port));
  std::unique_ptr<PeerLink> link(new PeerLink(options, sink, fd));
  std::strncpy(mine.host, options.hostname.c_str(), sizeof(mine.host) - 1);
  const int world = ctl.world_size();
  std::vector<Address> all(world);
  RETURN_IF_ERROR(ctl.AllGather(&mine, all.data(), sizeof(Address)));
  const int next = (ctl.rank() + 1) % world;
  link->next_host_ = std::string(all[next].host, strnlen(all[next].host, sizeof(mine.host)));
  link->next_port_ = all[next].port;
  link->next_label_ = next;
  link->receiver_ = std::thread([l = link.get()] { l->ReceiveLoop(); });
  link->sender_ = std::thread([l = link.get()] { l->SendLoop(); });
  return link;
}

PeerLink::~PeerLink() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    // Wakes accept / recv / send on the other threads at once.
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (send_fd_ >= 0) ::shutdown(send_fd_, SHUT_RDWR);
    if (recv_fd_ >= 0) ::shutdown(recv_fd_, SHUT_RDWR);
  }
  if (sender_.joinable()) sender_.join();
  if (receiver_.joinable()) receiver_.join();
  ::close(listen_fd_);
  if (send_fd_ >= 0) ::close(send_fd_);
}

void PeerLink::Send(const PeerFrameHeader& header, const char* payload, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  DCHECK(!pending_);
  header_ = header;
  payload_ = payload;
  bytes_ = bytes;
  sent_ = absl::OkStatus();
  pending_ = true;
}

absl::Status PeerLink::WaitSent() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](PeerLink* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return !l->pending_; }, this));
  return sent_;
}

bool PeerLink::Done(absl::Status* status) {
  absl::MutexLock lock(&mu_);
  if (pending_) return false;
  *status = sent_;
  return true;
}

absl::Status PeerLink::Connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(next_host_.c_str(), std::to_string(next_port_).c_str(), &hints, &res);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", next_host_, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string err = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    // Bounds connect, every send and the wait for the acknowledgement.
    const int64_t us = absl::ToInt64Microseconds(o_.timeout);
    timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    err = strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("connect: ", err));
  absl::MutexLock lock(&mu_);
  if (stop_) {
    ::close(fd);
    return absl::CancelledError("peer link stopped");
  }
  send_fd_ = fd;
  return absl::OkStatus();
}

absl::Status PeerLink::SendFrame() {
  PeerFrameHeader header;
  const char* payload;
  uint64_t bytes;
  int fd;
  {
    absl::MutexLock lock(&mu_);
    header = header_;
    payload = payload_;
    bytes = bytes_;
    fd = send_fd_;
  }
  if (fd < 0) {
    RETURN_IF_ERROR(Connect());
    absl::MutexLock lock(&mu_);
    fd = send_fd_;
  }
  const uint64_t crc = Crc32c(payload, bytes);
  uint64_t ack = 0;
  if (WriteFull(fd, header.data(), header.size()) && WriteFull(fd, &bytes, sizeof(bytes)) &&
      WriteFull(fd, payload, bytes) && WriteFull(fd, &crc, sizeof(crc)) &&
      ReadFull(fd, &ack, sizeof(ack)) && ack == crc) {
    return absl::OkStatus();
  }
  const std::string err = errno != 0 ? strerror(errno) : "connection closed";
  absl::MutexLock lock(&mu_);
  ::close(send_fd_);
  send_fd_ = -1;
  return absl::UnavailableError(absl::StrCat("sending a replica of ", bytes, " bytes to rank ",
                                             next_label_, " (", next_host_, ":", next_port_,
                                             "): ", ack != 0 ? "checksum refused" : err));
}

void PeerLink::SendLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PeerLink* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) {
            return l->stop_ || l->pending_;
          },
          this));
      if (stop_) {
        if (pending_) sent_ = absl::CancelledError("peer link stopped");
        pending_ = false;
        return;
      }
    }
    errno = 0;
    absl::Status s = SendFrame();
    absl::MutexLock lock(&mu_);
    sent_ = std::move(s);
    pending_ = false;
  }
}

void PeerLink::ReceiveLoop() {
  while (true) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    {
      absl::MutexLock lock(&mu_);
      if (stop_ || fd < 0) {
        if (fd >= 0) ::close(fd);
        if (stop_) return;
        continue;
      }
      recv_fd_ = fd;
    }
    PeerFrameHeader header;
    uint64_t bytes = 0;
    while (ReadFull(fd, header.data(), header.size()) && ReadFull(fd, &bytes, sizeof(bytes))) {
      char* into = sink_->Begin(header, bytes);
      const bool got = into != nullptr ? ReadFull(fd, into, bytes) : Skip(fd, bytes);
      uint64_t crc = 0;
      const bool whole = got && ReadFull(fd, &crc, sizeof(crc));
      const bool ok = whole && into != nullptr && Crc32c(into, bytes) == crc;
      if (into != nullptr) sink_->Complete(ok);
      // The sender counts the frame as held only with our checksum back.
      const uint64_t ack = ok ? crc : ~uint64_t{0};
      if (!whole || !WriteFull(fd, &ack, sizeof(ack))) break;
    }
    absl::MutexLock lock(&mu_);
    ::close(fd);
    recv_fd_ = -1;
    if (stop_) return;
  }
}

}  // namespace worker
}  // namespace tandem
