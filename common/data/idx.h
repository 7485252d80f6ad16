// Reader for IDX files (the MNIST / Fashion-MNIST container), gzipped or
// plain: a big-endian header (two zero bytes, a type code, the number of
// dimensions, then one u32 per dimension) followed by the elements.
//
//   ASSIGN_OR_RETURN(IdxArray images,
//                    ReadIdxFile("/usr/share/datasets/fashion-mnist/"
//                                "train-images-idx3-ubyte.gz"));
//   // images.dims == {60000, 28, 28}; images.data.size() == 60000*28*28
//
// Only the unsigned-byte type (0x08) is supported; that is what MNIST and
// Fashion-MNIST use. Thread-safe (pure function). Fails with a Status that
// names the file and the byte offset (in the uncompressed stream) where it
// found the problem: a missing file NOT_FOUND, a bad header, an unsupported
// type or a truncated body DATA_LOSS / INVALID_ARGUMENT.
#ifndef TANDEM_COMMON_DATA_IDX_H_
#define TANDEM_COMMON_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace data {

// One IDX array: its dimensions (outermost first) and its elements as one
// contiguous row-major buffer of product(dims) bytes.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;

  // Number of items along the first dimension (0 for a 0-d array).
  int64_t num_items() const { return dims.empty() ? 0 : dims[0]; }
  // Bytes per item: product of dims[1..].
  int64_t item_bytes() const;
};

// Reads a whole IDX file; gzip is detected by zlib (plain files also work).
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// The dimensions in the header of an IDX file, without reading its
// elements (same header errors as ReadIdxFile).
absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path);

// Writes `array` as a gzipped IDX file of type u8 (used by tests and tools).
absl::Status WriteIdxFile(const std::string& path, const IdxArray& array);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_IDX_H_
