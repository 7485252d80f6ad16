#include "common/checkpoint/checkpoint_image.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_format.h"
#include "common/io/crc32c.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace checkpoint {
namespace {

using internal::kFooterSize;
using internal::kHeaderSize;
using internal::kSectionHeaderSize;

// O_DIRECT wants buffer, offset and length aligned to the device's logical
// block; 4 KiB covers every block size in use.
constexpr uint64_t kAlign = 4096;

uint64_t RoundUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

absl::Status CheckpointImage::Reserve(uint64_t size) {
  const uint64_t want = RoundUp(size);
  if (want <= capacity_ && buffer_ != nullptr) return absl::OkStatus();
  buffer_.reset();
  capacity_ = 0;
  void* p = nullptr;
  if (::posix_memalign(&p, kAlign, want) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate the ", want, "-byte checkpoint snapshot; free host memory or turn "
        "background checkpoints off (--background_checkpoint=false)"));
  }
  buffer_.reset(static_cast<char*>(p));
  capacity_ = want;
  return absl::OkStatus();
}

void CheckpointImage::Capture(const CheckpointView& v) {
  step_ = v.step;
  sections_.clear();
  captured_ = internal::ValidateView("(snapshot)", v);
  if (!captured_.ok()) return;
  // The layout first (sizes only), then one copy per section.
  uint64_t size = kHeaderSize;
  (void)internal::ForEachSection(v, [&](uint32_t, const std::string& name, const void*,
                                        uint64_t bytes) {
    const uint64_t length = kSectionHeaderSize + name.size() + bytes;
    sections_.push_back({size, length});
    size += length + 4;
    return absl::OkStatus();
  });
  size += kFooterSize;
  captured_ = Reserve(size);
  if (!captured_.ok()) return;
  size_ = size;
  char* out = buffer_.get();
  internal::EncodeHeader(v, out);
  size_t i = 0;
  (void)internal::ForEachSection(v, [&](uint32_t type, const std::string& name,
                                        const void* payload, uint64_t bytes) {
    char* p = out + sections_[i++].offset;
    internal::EncodeSectionHeader(type, name.size(), bytes, p);
    std::memcpy(p + kSectionHeaderSize, name.data(), name.size());
    if (bytes > 0) std::memcpy(p + kSectionHeaderSize + name.size(), payload, bytes);
    return absl::OkStatus();
  });
  internal::EncodeFooter(size, out + size - kFooterSize);
  // The padding O_DIRECT writes (and the file is then cut back from).
  std::memset(out + size, 0, RoundUp(size) - size);
}

absl::Status CheckpointImage::Write(const std::string& path, const ImageWriteOptions& options) {
  if (!captured_.ok()) {
    return absl::Status(captured_.code(), absl::StrCat("checkpoint ", path, ": ",
                                                       captured_.message()));
  }
  if (buffer_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, ": nothing was captured to write"));
  }
  for (const Section& s : sections_) {
    internal::PutAt<uint32_t>(buffer_.get() + s.offset + s.length,
                              Crc32c(buffer_.get() + s.offset, s.length));
  }
  return internal::WriteAtomically(path, options.direct, [&](int fd, bool direct) {
    return WritePieces(fd, direct, options, path);
  });
}

absl::Status CheckpointImage::WritePieces(int fd, bool direct, const ImageWriteOptions& options,
                                          const std::string& path) const {
  const uint64_t piece = std::max(kAlign, options.piece_bytes / kAlign * kAlign);
  // O_DIRECT writes whole blocks: the padding goes out too and is cut off.
  uint64_t end = direct ? RoundUp(size_) : size_;
  uint64_t offset = 0;
  while (offset < end) {
    // The header's block first, on its own: a hook sees a write at offset 0
    // and, for any file past one block, more after it.
    const uint64_t n = std::min(end - offset, offset == 0 ? kAlign : piece);
    if (options.write.before_write) RETURN_IF_ERROR(options.write.before_write(offset, n));
    const ssize_t w = ::pwrite(fd, buffer_.get() + offset, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct) {
      // Refused after all (or a short write left an unaligned offset): go
      // on through the page cache.
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) != 0) {
        return internal::ErrnoError("clear O_DIRECT", path, errno);
      }
      direct = false;
      end = size_;
      continue;
    }
    if (w < 0) return internal::ErrnoError("write", path, errno);
    offset += static_cast<uint64_t>(w);
  }
  if (offset > size_ && ::ftruncate(fd, static_cast<off_t>(size_)) != 0) {
    return internal::ErrnoError("truncate to its size", path, errno);
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace tandem
