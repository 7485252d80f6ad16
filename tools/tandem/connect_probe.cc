// connect_probe HOST PORT: connects to HOST:PORT without binding first and
// prints the local address the connection got. For bind_source_test.sh.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: connect_probe HOST PORT\n");
    return 2;
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
  if (inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1) return 2;
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
    std::perror("connect");
    return 1;
  }
  sockaddr_in self{};
  socklen_t len = sizeof(self);
  getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text));
  std::printf("%s\n", text);
  close(fd);
  return 0;
}
