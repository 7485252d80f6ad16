#include "common/checkpoint/checkpoint_format.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace checkpoint {
namespace internal {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the checkpoint format is little-endian; add byte swapping to "
              "port it to a big-endian host");


std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Makes a rename in `path`'s directory durable.
absl::Status SyncDirectory(const std::string& path) {
  const std::string dir = DirName(path);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoError("open directory " + dir, path, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) return ErrnoError("fsync directory " + dir, path, err);
  return absl::OkStatus();
}

}  // namespace

absl::Status ErrnoError(absl::string_view what, const std::string& path, int err) {
  const std::string msg = absl::StrCat("checkpoint ", path, ": ", what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status ValidateView(const std::string& path, const CheckpointView& v) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write checkpoint ", path, ": ", what));
  };
  if (v.range_lo < 0 || v.range_hi < v.range_lo || v.range_hi > v.total_params) {
    return bad(absl::StrCat("range [", v.range_lo, ", ", v.range_hi, ") is not inside the ",
                            v.total_params, "-parameter vector"));
  }
  const uint64_t n = static_cast<uint64_t>(v.range_hi - v.range_lo);
  if (v.params.size() != n) {
    return bad(absl::StrCat("params has ", v.params.size(), " values but the range holds ", n));
  }
  if (v.step < 0) return bad(absl::StrCat("step is negative (", v.step, ")"));
  std::set<std::string> names;
  for (const auto& [name, data] : v.optimizer_state) {
    if (name.empty() || name.size() + kOptimPrefix.size() > kMaxNameLength) {
      return bad(absl::StrCat("optimizer state name '", name, "' must have 1..",
                              kMaxNameLength - 10, " characters"));
    }
    if (!names.insert("o" + name).second) {
      return bad(absl::StrCat("optimizer state '", name, "' appears twice"));
    }
    if (data.size() != n) {
      return bad(absl::StrCat("optimizer state '", name, "' has ", data.size(),
                              " values but the range holds ", n));
    }
  }
  for (const auto& [name, data] : v.blobs) {
    if (name.empty() || name.size() + kBlobPrefix.size() > kMaxNameLength) {
      return bad(absl::StrCat("blob name '", name, "' must have 1..", kMaxNameLength - 10,
                              " characters"));
    }
    if (!names.insert("b" + name).second) {
      return bad(absl::StrCat("blob '", name, "' appears twice"));
    }
  }
  return absl::OkStatus();
}

void EncodeHeader(const CheckpointView& v, char out[kHeaderSize]) {
  const uint32_t sections = 1 + (v.optimizer_name.empty() ? 0 : 1) +
                            static_cast<uint32_t>(v.optimizer_state.size() + v.blobs.size());
  std::memset(out, 0, kHeaderSize);
  std::memcpy(out, kMagic, 8);
  PutAt<uint32_t>(out + 8, kVersion);
  PutAt<uint32_t>(out + 12, kHeaderSize);
  PutAt<uint64_t>(out + 16, v.model_fingerprint);
  PutAt<int64_t>(out + 24, v.step);
  PutAt<int64_t>(out + 32, v.total_params);
  PutAt<int64_t>(out + 40, v.range_lo);
  PutAt<int64_t>(out + 48, v.range_hi);
  PutAt<uint32_t>(out + 56, sections);
  PutAt<uint32_t>(out + kHeaderCrcOffset, Crc32c(out, kHeaderCrcOffset));
}

void EncodeSectionHeader(uint32_t type, uint64_t name_size, uint64_t payload_size,
                         char out[kSectionHeaderSize]) {
  PutAt<uint32_t>(out, type);
  PutAt<uint32_t>(out + 4, static_cast<uint32_t>(name_size));
  PutAt<uint64_t>(out + 8, payload_size);
}

void EncodeFooter(uint64_t file_size, char out[kFooterSize]) {
  std::memcpy(out, kEndMagic, 8);
  PutAt<uint64_t>(out + 8, file_size);
}

absl::Status ForEachSection(const CheckpointView& v, const SectionFn& section) {
  RETURN_IF_ERROR(section(kTypeF32, std::string(kParamsSection), v.params.data(),
                          v.params.size() * sizeof(float)));
  if (!v.optimizer_name.empty()) {
    RETURN_IF_ERROR(section(kTypeBytes, std::string(kOptimizerSection), v.optimizer_name.data(),
                            v.optimizer_name.size()));
  }
  for (const auto& [name, data] : v.optimizer_state) {
    RETURN_IF_ERROR(section(kTypeF32, absl::StrCat(kOptimPrefix, name), data.data(),
                            data.size() * sizeof(float)));
  }
  for (const auto& [name, data] : v.blobs) {
    RETURN_IF_ERROR(
        section(kTypeBytes, absl::StrCat(kBlobPrefix, name), data.data(), data.size()));
  }
  return absl::OkStatus();
}

absl::Status WriteAtomically(const std::string& path, bool try_direct,
                             const std::function<absl::Status(int fd, bool direct)>& body) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
  bool direct = false;
  int fd = -1;
  if (try_direct) {
    fd = ::open(tmp.c_str(), kFlags | O_DIRECT, 0644);
    direct = fd >= 0;
    // EINVAL: this file system has no O_DIRECT (tmpfs); write through the page cache.
    if (fd < 0 && errno != EINVAL) return ErrnoError("create temporary file " + tmp, path, errno);
    if (fd < 0) ::unlink(tmp.c_str());  // some kernels create the file before refusing
  }
  if (fd < 0) fd = ::open(tmp.c_str(), kFlags, 0644);
  if (fd < 0) return ErrnoError("create temporary file " + tmp, path, errno);
  absl::Status status = body(fd, direct);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError("fsync", path, errno);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError("close", path, errno);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("rename " + tmp + " to it", path, errno);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return SyncDirectory(path);
}

}  // namespace internal
}  // namespace checkpoint
}  // namespace tandem
