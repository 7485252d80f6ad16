#include "common/data/idx.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace data {
namespace {

constexpr uint8_t kTypeU8 = 0x08;
constexpr int kMaxDims = 8;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly `n` bytes at uncompressed offset `*offset`; a short read is
// DATA_LOSS naming the file, the offset and what was being read.
absl::Status ReadExact(gzFile f, const std::string& path, int64_t* offset,
                       void* dst, int64_t n, const char* what) {
  uint8_t* p = static_cast<uint8_t*>(dst);
  int64_t left = n;
  while (left > 0) {
    const unsigned chunk =
        static_cast<unsigned>(std::min<int64_t>(left, 1 << 30));
    const int got = gzread(f, p, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      return absl::DataLossError(absl::StrCat(
          path, ": corrupt compressed data at uncompressed offset ",
          *offset, " while reading ", what, ": ", msg,
          "; re-download or regenerate the file"));
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(
          path, ": truncated at offset ", *offset, " while reading ", what,
          " (", left, " more bytes expected); re-download or regenerate the "
          "file"));
    }
    p += got;
    left -= got;
    *offset += got;
  }
  return absl::OkStatus();
}

uint32_t BigEndian32(const uint8_t* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
         (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

}  // namespace

int64_t IdxArray::item_bytes() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

namespace {

// Opens `path` and reads its header into out->dims; `f` is left at the
// first element, `*offset` counts the bytes read.
absl::Status OpenAndReadHeader(const std::string& path, GzFile* f, int64_t* offset,
                               IdxArray* out) {
  f->reset(gzopen(path.c_str(), "rb"));
  if (*f == nullptr) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no such file; check the dataset path"));
    }
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  gzbuffer(f->get(), 1 << 20);
  uint8_t magic[4];
  RETURN_IF_ERROR(ReadExact(f->get(), path, offset, magic, 4, "the header"));
  if (magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not an IDX file (offset 0: magic must start with two zero "
        "bytes)"));
  }
  if (magic[2] != kTypeU8) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": unsupported IDX element type 0x", absl::Hex(magic[2]),
        " at offset 2; only unsigned bytes (0x08) are supported"));
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": bad IDX dimension count ", ndims, " at offset 3 (1..",
        kMaxDims, " allowed)"));
  }
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    const int64_t at = *offset;
    uint8_t b[4];
    RETURN_IF_ERROR(
        ReadExact(f->get(), path, offset, b, 4, "the dimension sizes"));
    const int64_t d = BigEndian32(b);
    if (d > (int64_t{1} << 40) / std::max<int64_t>(total, 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": implausible dimension ", d, " at offset ", at));
    }
    out->dims.push_back(d);
    total *= d;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path) {
  GzFile f;
  int64_t offset = 0;
  IdxArray out;
  RETURN_IF_ERROR(OpenAndReadHeader(path, &f, &offset, &out));
  return out.dims;
}

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  GzFile f;
  int64_t offset = 0;
  IdxArray out;
  RETURN_IF_ERROR(OpenAndReadHeader(path, &f, &offset, &out));
  const int64_t total = out.num_items() * out.item_bytes();
  out.data.resize(total);
  RETURN_IF_ERROR(ReadExact(f.get(), path, &offset, out.data.data(), total,
                            "the elements"));
  uint8_t extra;
  if (gzread(f.get(), &extra, 1) > 0) {
    return absl::DataLossError(absl::StrCat(
        path, ": trailing data at offset ", offset, " after ", total,
        " elements; the header does not match the body"));
  }
  return out;
}

absl::Status WriteIdxFile(const std::string& path, const IdxArray& array) {
  int64_t total = 1;
  for (int64_t d : array.dims) total *= d;
  if (array.dims.empty() || array.dims.size() > kMaxDims ||
      total != static_cast<int64_t>(array.data.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WriteIdxFile ", path, ": dims do not match the data size ",
        array.data.size()));
  }
  GzFile f(gzopen(path.c_str(), "wb"));
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        path, ": cannot create: ", std::strerror(errno)));
  }
  std::string header = {0, 0, static_cast<char>(kTypeU8),
                        static_cast<char>(array.dims.size())};
  for (int64_t d : array.dims) {
    const uint32_t v = static_cast<uint32_t>(d);
    header.push_back(static_cast<char>(v >> 24));
    header.push_back(static_cast<char>(v >> 16));
    header.push_back(static_cast<char>(v >> 8));
    header.push_back(static_cast<char>(v));
  }
  if (gzwrite(f.get(), header.data(), header.size()) !=
          static_cast<int>(header.size()) ||
      (total > 0 && gzwrite(f.get(), array.data.data(), total) != total)) {
    return absl::DataLossError(absl::StrCat(path, ": write failed"));
  }
  if (gzclose(f.release()) != Z_OK) {
    return absl::DataLossError(absl::StrCat(path, ": close failed"));
  }
  return absl::OkStatus();
}

}  // namespace data
}  // namespace tandem
