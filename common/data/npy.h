// Reader and writer for NumPy's .npy format (versions 1.0, 2.0 and 3.0):
// a magic string, a header that is a Python dict literal naming the dtype,
// the memory order and the shape, then the elements.
//
//   ASSIGN_OR_RETURN(NpyArray x, ReadNpyFile("X.npy"));
//   // x.dtype == NpyDType::kFloat32, x.shape == {60000, 1, 28, 28},
//   // x.data holds 60000*784*4 bytes, little-endian, C order
//
// Supported element types: float32 ('<f4'), uint8 ('|u1'), int32 ('<i4')
// and int64 ('<i8'), little-endian, C order, any shape (0-d included).
// Thread-safe (pure functions). Every error names the file and what to do:
// NOT_FOUND (no file), INVALID_ARGUMENT (not a .npy file, a malformed
// header, an unsupported dtype — the message lists the supported ones —,
// Fortran order), DATA_LOSS (fewer bytes than the header's shape needs, or
// bytes after them).
#ifndef TANDEM_COMMON_DATA_NPY_H_
#define TANDEM_COMMON_DATA_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace data {

enum class NpyDType { kFloat32, kUInt8, kInt32, kInt64 };

// Bytes per element; the numpy name ("float32"); the header's descr ("<f4").
int NpyDTypeSize(NpyDType t);
const char* NpyDTypeName(NpyDType t);
const char* NpyDTypeDescr(NpyDType t);

struct NpyArray {
  NpyDType dtype = NpyDType::kFloat32;
  std::vector<int64_t> shape;  // outermost first; empty = a scalar
  std::string data;            // product(shape) elements, little-endian, C order

  int64_t elements() const;
};

// The header alone: dtype, shape, and where the data starts.
struct NpyHeader {
  NpyDType dtype = NpyDType::kFloat32;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;
};

// Parses the header at the start of `bytes` (the file's first bytes; the
// whole header must be there); `path` only names the file in errors.
absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, const std::string& path);

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);

// Writes `array` as a version 1.0 file (tests, tools).
absl::Status WriteNpyFile(const std::string& path, const NpyArray& array);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_NPY_H_
