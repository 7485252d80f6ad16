#include "common/checkpoint/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint_format.h"
#include "common/io/crc32c.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace checkpoint {
namespace {

constexpr size_t kWriteBufferSize = 1 << 20;

using internal::ErrnoError;
using internal::kBlobPrefix;
using internal::kEndMagic;
using internal::kMagic;
using internal::kMaxNameLength;
using internal::kOptimizerSection;
using internal::kOptimPrefix;
using internal::kParamsSection;
using internal::kVersion;
using internal::kFooterSize;
using internal::kHeaderCrcOffset;
using internal::kHeaderSize;
using internal::kSectionHeaderSize;
using internal::kTypeBytes;
using internal::kTypeF32;

template <typename T>
T GetAt(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(
      "checkpoint ", path, " is corrupt or truncated: ", what,
      "; it cannot be used (restore from an earlier checkpoint)"));
}

// Buffered writer over a file descriptor; large payloads bypass the buffer.
class FileWriter {
 public:
  FileWriter(int fd, const std::string& path, const WriteOptions& options)
      : fd_(fd), path_(path), options_(options) {
    buffer_.reserve(kWriteBufferSize);
  }

  absl::Status Append(const void* data, size_t n) {
    if (n == 0) return absl::OkStatus();
    const char* p = static_cast<const char*>(data);
    if (buffer_.size() + n <= kWriteBufferSize) {
      buffer_.append(p, n);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(Flush());
    if (n >= kWriteBufferSize) return WriteAll(p, n);
    buffer_.append(p, n);
    return absl::OkStatus();
  }

  absl::Status Flush() {
    absl::Status s = WriteAll(buffer_.data(), buffer_.size());
    buffer_.clear();
    return s;
  }

  uint64_t bytes_written() const { return written_ + buffer_.size(); }

 private:
  absl::Status WriteAll(const char* p, size_t n) {
    if (n > 0 && options_.before_write) RETURN_IF_ERROR(options_.before_write(written_, n));
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("write", path_, errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
    return absl::OkStatus();
  }

  int fd_;
  const std::string& path_;
  const WriteOptions& options_;
  std::string buffer_;
  uint64_t written_ = 0;
};

absl::Status WriteSection(FileWriter* w, uint32_t type, const std::string& name,
                          const void* payload, uint64_t size) {
  char header[kSectionHeaderSize];
  internal::EncodeSectionHeader(type, name.size(), size, header);
  uint32_t crc = Crc32c(header, sizeof(header));
  crc = Crc32cExtend(crc, name.data(), name.size());
  crc = Crc32cExtend(crc, payload, size);
  RETURN_IF_ERROR(w->Append(header, sizeof(header)));
  RETURN_IF_ERROR(w->Append(name.data(), name.size()));
  RETURN_IF_ERROR(w->Append(payload, size));
  char crc_bytes[4];
  internal::PutAt<uint32_t>(crc_bytes, crc);
  return w->Append(crc_bytes, 4);
}

absl::Status WriteBody(FileWriter* w, const CheckpointView& v) {
  char header[kHeaderSize];
  internal::EncodeHeader(v, header);
  RETURN_IF_ERROR(w->Append(header, kHeaderSize));
  RETURN_IF_ERROR(internal::ForEachSection(
      v, [w](uint32_t type, const std::string& name, const void* payload, uint64_t size) {
        return WriteSection(w, type, name, payload, size);
      }));
  char footer[kFooterSize];
  internal::EncodeFooter(w->bytes_written() + kFooterSize, footer);
  RETURN_IF_ERROR(w->Append(footer, kFooterSize));
  return w->Flush();
}

// Reads exactly n bytes at `offset`; DataLoss if the file ends first.
absl::Status ReadAt(int fd, const std::string& path, uint64_t offset,
                    void* dst, uint64_t n) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(absl::StrCat("read at offset ", offset), path, errno);
    }
    if (r == 0) {
      return Corrupt(path, absl::StrCat("file ends at offset ", offset,
                                        " while ", n, " more bytes were expected"));
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

// Closes an fd on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// The header and footer: magic, CRC, version, end marker, the fields into
// *c (params and sections not yet), the model fingerprint. Returns the
// number of sections.
absl::StatusOr<uint32_t> ReadHeaderAndFooter(int fd, const std::string& path, uint64_t size,
                                             const ReadOptions& options, Checkpoint* out) {
  if (size < kHeaderSize + kFooterSize) {
    return Corrupt(path, absl::StrCat("file has ", size,
                                      " bytes, fewer than the ",
                                      kHeaderSize + kFooterSize,
                                      " of an empty checkpoint"));
  }
  char header[kHeaderSize];
  RETURN_IF_ERROR(ReadAt(fd, path, 0, header, kHeaderSize));
  if (std::memcmp(header, kMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path,
        " is not a tandem checkpoint (no 'TNDMCKPT' magic at offset 0)"));
  }
  const uint32_t stored_header_crc = GetAt<uint32_t>(header + kHeaderCrcOffset);
  const uint32_t header_crc = Crc32c(header, kHeaderCrcOffset);
  if (stored_header_crc != header_crc) {
    return Corrupt(path, absl::StrCat("header (offset 0..", kHeaderCrcOffset,
                                      ") fails its CRC32C (stored ",
                                      stored_header_crc, ", computed ",
                                      header_crc, ")"));
  }
  const uint32_t version = GetAt<uint32_t>(header + 8);
  if (version != kVersion || GetAt<uint32_t>(header + 12) != kHeaderSize) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " has format version ", version,
        "; this build reads version ", kVersion));
  }
  char footer[kFooterSize];
  RETURN_IF_ERROR(ReadAt(fd, path, size - kFooterSize, footer, kFooterSize));
  const uint64_t recorded_size = GetAt<uint64_t>(footer + 8);
  if (std::memcmp(footer, kEndMagic, 8) != 0 || recorded_size != size) {
    return Corrupt(path, absl::StrCat(
        "no valid end marker at offset ", size - kFooterSize, " (file has ",
        size, " bytes",
        std::memcmp(footer, kEndMagic, 8) == 0
            ? absl::StrCat(", footer records ", recorded_size)
            : std::string(),
        "): the write did not complete or the file was cut"));
  }

  Checkpoint& c = *out;
  c.model_fingerprint = GetAt<uint64_t>(header + 16);
  c.step = GetAt<int64_t>(header + 24);
  c.total_params = GetAt<int64_t>(header + 32);
  c.range_lo = GetAt<int64_t>(header + 40);
  c.range_hi = GetAt<int64_t>(header + 48);
  const uint32_t sections = GetAt<uint32_t>(header + 56);
  if (c.range_lo < 0 || c.range_hi < c.range_lo ||
      c.range_hi > c.total_params || c.step < 0) {
    return Corrupt(path, absl::StrCat("header holds an impossible range [",
                                      c.range_lo, ", ", c.range_hi, ") of ",
                                      c.total_params, " or step ", c.step));
  }
  if (options.expected_model_fingerprint.has_value() &&
      *options.expected_model_fingerprint != c.model_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " belongs to another model: its fingerprint is ",
        absl::Hex(c.model_fingerprint, absl::kZeroPad16),
        " but this model's is ",
        absl::Hex(*options.expected_model_fingerprint, absl::kZeroPad16),
        " (different spec or parameter layout); point the job at a "
        "checkpoint of this model or start from scratch"));
  }

  return sections;
}

// One section read whole and checked against its CRC32C.
struct Section {
  uint32_t type = 0;
  std::string name;
  uint64_t offset = 0;       // of its header
  uint64_t next_offset = 0;  // where the next section starts
  std::vector<float> floats;  // kTypeF32
  std::string bytes;          // kTypeBytes
};

absl::StatusOr<Section> ReadSection(int fd, const std::string& path, uint64_t offset,
                                    uint64_t end, uint32_t s, uint32_t sections) {
  if (end - offset < kSectionHeaderSize + 4) {
    return Corrupt(path, absl::StrCat("section ", s, " of ", sections,
                                      " would start at offset ", offset,
                                      " but the sections end at ", end));
  }
  char sh[kSectionHeaderSize];
  RETURN_IF_ERROR(ReadAt(fd, path, offset, sh, kSectionHeaderSize));
  Section sec;
  sec.offset = offset;
  sec.type = GetAt<uint32_t>(sh);
  const uint32_t type = sec.type;
  const uint32_t name_len = GetAt<uint32_t>(sh + 4);
  const uint64_t payload = GetAt<uint64_t>(sh + 8);
  const uint64_t room = end - offset - kSectionHeaderSize - 4;
  if ((type != kTypeF32 && type != kTypeBytes) || name_len == 0 ||
      name_len > kMaxNameLength || name_len > room ||
      payload > room - name_len ||
      (type == kTypeF32 && payload % sizeof(float) != 0)) {
    return Corrupt(path, absl::StrCat(
        "section ", s, " at offset ", offset, " has an invalid header (type ",
        type, ", name length ", name_len, ", payload ", payload,
        " bytes, ", room, " bytes left)"));
  }
  sec.name.assign(name_len, '\0');
  RETURN_IF_ERROR(ReadAt(fd, path, offset + kSectionHeaderSize, sec.name.data(),
                         name_len));
  const uint64_t data_offset = offset + kSectionHeaderSize + name_len;
  void* dst;
  if (type == kTypeF32) {
    sec.floats.resize(payload / sizeof(float));
    dst = sec.floats.data();
  } else {
    sec.bytes.resize(payload);
    dst = sec.bytes.data();
  }
  RETURN_IF_ERROR(ReadAt(fd, path, data_offset, dst, payload));
  char crc_bytes[4];
  RETURN_IF_ERROR(ReadAt(fd, path, data_offset + payload, crc_bytes, 4));
  uint32_t crc = Crc32c(sh, kSectionHeaderSize);
  crc = Crc32cExtend(crc, sec.name.data(), sec.name.size());
  crc = Crc32cExtend(crc, dst, payload);
  const uint32_t stored = GetAt<uint32_t>(crc_bytes);
  if (crc != stored) {
    return Corrupt(path, absl::StrCat(
        "section '", sec.name, "' at offset ", offset, " (", payload,
        " bytes) fails its CRC32C (stored ", stored, ", computed ", crc, ")"));
  }
  sec.next_offset = data_offset + payload + 4;
  return sec;
}

// Files a verified section into *c by its name and type.
absl::Status StoreSection(Section sec, const std::string& path, Checkpoint* c,
                          bool* have_params) {
  const uint64_t expected_floats = static_cast<uint64_t>(c->range_hi - c->range_lo);
  const std::string& name = sec.name;
  auto wrong_type = [&]() {
    return Corrupt(path, absl::StrCat("section '", name, "' at offset ",
                                      sec.offset, " has the wrong type ", sec.type));
  };
  auto wrong_size = [&]() {
    return Corrupt(path, absl::StrCat(
        "section '", name, "' at offset ", sec.offset, " holds ", sec.floats.size(),
        " values but the range [", c->range_lo, ", ", c->range_hi, ") needs ",
        expected_floats));
  };
  if (name == kParamsSection) {
    if (sec.type != kTypeF32) return wrong_type();
    if (sec.floats.size() != expected_floats) return wrong_size();
    c->params = std::move(sec.floats);
    *have_params = true;
  } else if (name == kOptimizerSection) {
    if (sec.type != kTypeBytes) return wrong_type();
    c->optimizer_name = std::move(sec.bytes);
  } else if (absl::StartsWith(name, kOptimPrefix)) {
    if (sec.type != kTypeF32) return wrong_type();
    if (sec.floats.size() != expected_floats) return wrong_size();
    c->optimizer_state.emplace_back(name.substr(kOptimPrefix.size()), std::move(sec.floats));
  } else if (absl::StartsWith(name, kBlobPrefix)) {
    if (sec.type != kTypeBytes) return wrong_type();
    c->blobs.emplace_back(name.substr(kBlobPrefix.size()), std::move(sec.bytes));
  } else {
    return Corrupt(path, absl::StrCat("unknown section '", name,
                                      "' at offset ", sec.offset));
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> ReadAndVerify(int fd, const std::string& path,
                                         uint64_t size,
                                         const ReadOptions& options) {
  Checkpoint c;
  ASSIGN_OR_RETURN(const uint32_t sections, ReadHeaderAndFooter(fd, path, size, options, &c));
  const uint64_t end = size - kFooterSize;
  uint64_t offset = kHeaderSize;
  bool have_params = false;
  for (uint32_t s = 0; s < sections; ++s) {
    ASSIGN_OR_RETURN(Section sec, ReadSection(fd, path, offset, end, s, sections));
    offset = sec.next_offset;
    RETURN_IF_ERROR(StoreSection(std::move(sec), path, &c, &have_params));
  }
  if (offset != end) {
    return Corrupt(path, absl::StrCat(sections, " sections end at offset ",
                                      offset, " but the footer starts at ",
                                      end));
  }
  if (!have_params) return Corrupt(path, "it has no 'params' section");
  return c;
}

}  // namespace

const std::string* Checkpoint::FindBlob(absl::string_view name) const {
  for (const auto& [n, data] : blobs) {
    if (n == name) return &data;
  }
  return nullptr;
}

const std::vector<float>* Checkpoint::FindOptimizerState(
    absl::string_view name) const {
  for (const auto& [n, data] : optimizer_state) {
    if (n == name) return &data;
  }
  return nullptr;
}

absl::Status WriteCheckpoint(const std::string& path,
                             const CheckpointView& view) {
  return WriteCheckpoint(path, view, WriteOptions());
}

absl::Status WriteCheckpoint(const std::string& path, const CheckpointView& view,
                             const WriteOptions& options) {
  RETURN_IF_ERROR(internal::ValidateView(path, view));
  return internal::WriteAtomically(path, /*try_direct=*/false, [&](int fd, bool) {
    FileWriter writer(fd, path, options);
    return WriteBody(&writer, view);
  });
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path,
                                          const ReadOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError("stat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", path, " is not a regular file"));
  }
  return ReadAndVerify(fd, path, static_cast<uint64_t>(st.st_size), options);
}

uint64_t ModelFingerprint(absl::string_view model_description) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char ch : model_description) {
    h ^= ch;
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

void AddOptimizerState(optim::Optimizer& optimizer, CheckpointView* view) {
  view->optimizer_name = optimizer.name();
  view->optimizer_state.clear();
  for (const optim::StateBuffer& b : optimizer.state()) {
    view->optimizer_state.emplace_back(b.name, absl::Span<const float>(b.data));
  }
}

absl::Status RestoreOptimizerState(const Checkpoint& c,
                                   optim::Optimizer* optimizer) {
  const optim::ParamRange& r = optimizer->range();
  if (c.optimizer_name != optimizer->name()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds state of optimizer '", c.optimizer_name,
        "' but the job uses '", optimizer->name(),
        "'; use the same optimizer or start its state from zero"));
  }
  if (c.range_lo != r.lo || c.range_hi != r.hi) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds optimizer state for range [", c.range_lo, ", ",
        c.range_hi, ") but this optimizer owns [", r.lo, ", ", r.hi,
        "); reshard the checkpoint first"));
  }
  std::vector<optim::StateBuffer> buffers = optimizer->state();
  if (buffers.size() != c.optimizer_state.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds ", c.optimizer_state.size(),
        " optimizer state buffers but '", optimizer->name(), "' has ",
        buffers.size(), " (different options, e.g. momentum on/off?)"));
  }
  // Check everything before copying anything.
  std::vector<const std::vector<float>*> sources;
  for (const optim::StateBuffer& b : buffers) {
    const std::vector<float>* src = c.FindOptimizerState(b.name);
    if (src == nullptr || src->size() != b.data.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint has no optimizer state '", b.name, "' of ",
          b.data.size(), " values"));
    }
    sources.push_back(src);
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (sources[i]->empty()) continue;
    std::memcpy(buffers[i].data.data(), sources[i]->data(),
                sources[i]->size() * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace tandem
