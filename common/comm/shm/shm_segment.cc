#include "common/comm/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

std::string ShmSegmentName(absl::string_view prefix) {
  std::string clean;
  for (char ch : prefix.substr(0, 160)) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    clean.push_back(ok ? ch : '_');
  }
  std::random_device rd;
  return absl::StrCat("/tandem-", clean, "-", getpid(), "-", absl::Hex(rd(), absl::kZeroPad8));
}

absl::StatusOr<int> CreateShmSegment(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("shm: rank 0 could not create ", name, ": ", Errno(errno)));
  }
  if (int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(absl::StrCat(
        "shm: could not reserve ", bytes, " bytes for ", name, ": ", Errno(err),
        " (is /dev/shm full? lower chunk_bytes or use the gloo transport)"));
  }
  return fd;
}

absl::StatusOr<int> OpenShmSegment(gloo::rendezvous::Store& store, const std::string& key,
                                   int rank, absl::Duration timeout, size_t bytes,
                                   std::string* name) {
  try {
    store.wait({key}, absl::ToChronoMilliseconds(timeout));
    const std::vector<char> v = store.get(key);
    name->assign(v.begin(), v.end());
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(absl::StrCat(
        "shm connect on rank ", rank, ": no segment name from rank 0 under '", key,
        "': ", e.what()));
  }
  const int fd = shm_open(name->c_str(), O_RDWR, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("shm connect on rank ", rank,
                                               ": could not open ", *name, ": ", Errno(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "shm connect on rank ", rank, ": segment ", *name,
        " has the wrong size (ranks disagree on world_size or chunk_bytes)"));
  }
  return fd;
}

}  // namespace tandem
