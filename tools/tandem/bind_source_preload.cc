// libtandem_bind_source.so, loaded with LD_PRELOAD into the processes of one
// simulated node (`tandem local --nodes`): a TCP socket that connects
// without having been bound is first bound to $TANDEM_BIND_SOURCE (port 0),
// so everything the node sends leaves from its own address.
//
// Why: all simulated nodes share one network stack, and Gloo's TCP pairs
// (gloo 0.0~git20220518: socket, setsockopt, connect) and gRPC clients
// connect without binding, so the kernel would pick 127.0.0.1 as the source
// and the per-node tc filters (by source address) would not see them. On
// real hosts the kernel picks the host's own address and nothing is needed.
// Only stream sockets that are still unbound are touched (IPv4, and IPv6
// ones connecting to an IPv4-mapped address); a failed bind is ignored (the connect then goes ahead as it would have).
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <cstring>

namespace {

using ConnectFn = int (*)(int, const sockaddr*, socklen_t);

in_addr_t g_source = 0;  // network order; 0 = not set
ConnectFn g_connect = nullptr;

__attribute__((constructor)) void Init() {
  g_connect = reinterpret_cast<ConnectFn>(dlsym(RTLD_NEXT, "connect"));
  const char* s = getenv("TANDEM_BIND_SOURCE");
  in_addr a{};
  if (s != nullptr && inet_pton(AF_INET, s, &a) == 1) g_source = a.s_addr;
}

void BindIfUnbound(int fd) {
  int type = 0;
  socklen_t type_len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) return;
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) return;
  if (self.sin_family != AF_INET || self.sin_port != 0 || self.sin_addr.s_addr != INADDR_ANY) {
    return;
  }
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = g_source;
  bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src));
}

// gRPC clients use dual-stack IPv6 sockets and connect to IPv4-mapped
// addresses (::ffff:127.0.1.3): bind those to ::ffff:$TANDEM_BIND_SOURCE.
void BindIfUnbound6(int fd) {
  int type = 0;
  socklen_t type_len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) return;
  sockaddr_in6 self{};
  socklen_t len = sizeof(self);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) return;
  if (self.sin6_family != AF_INET6 || self.sin6_port != 0 ||
      !IN6_IS_ADDR_UNSPECIFIED(&self.sin6_addr)) {
    return;
  }
  sockaddr_in6 src{};
  src.sin6_family = AF_INET6;
  src.sin6_addr.s6_addr[10] = 0xff;
  src.sin6_addr.s6_addr[11] = 0xff;
  std::memcpy(&src.sin6_addr.s6_addr[12], &g_source, 4);
  bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src));
}

}  // namespace

extern "C" int connect(int fd, const sockaddr* addr, socklen_t len) {
  if (g_connect == nullptr) g_connect = reinterpret_cast<ConnectFn>(dlsym(RTLD_NEXT, "connect"));
  if (g_source != 0 && addr != nullptr && addr->sa_family == AF_INET) BindIfUnbound(fd);
  if (g_source != 0 && addr != nullptr && addr->sa_family == AF_INET6 &&
      len >= static_cast<socklen_t>(sizeof(sockaddr_in6)) &&
      IN6_IS_ADDR_V4MAPPED(&reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr)) {
    BindIfUnbound6(fd);
  }
  return g_connect(fd, addr, len);
}
