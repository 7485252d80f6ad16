#include "common/data/npy.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace data {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int kMagicBytes = 6;
constexpr char kSupported[] =
    "supported: float32 ('<f4'), uint8 ('|u1'), int32 ('<i4'), int64 ('<i8'); convert "
    "with e.g. np.save(path, X.astype(np.float32))";

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// The text after "'key':" in the header dict, up to the end of the dict.
absl::StatusOr<absl::string_view> ValueOf(absl::string_view dict, absl::string_view key,
                                          const std::string& path) {
  for (const char quote : {'\'', '"'}) {
    const std::string needle = absl::StrCat(std::string(1, quote), key, std::string(1, quote));
    const size_t at = dict.find(needle);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = dict.substr(at + needle.size());
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (rest.empty() || rest.front() != ':') break;
    return absl::StripLeadingAsciiWhitespace(rest.substr(1));
  }
  return Bad(path, absl::StrCat("malformed .npy header: no '", key, "' key in ", dict));
}

absl::StatusOr<NpyDType> ParseDescr(absl::string_view value, const std::string& path) {
  if (value.empty() || (value.front() != '\'' && value.front() != '"')) {
    return Bad(path, absl::StrCat("malformed .npy header: 'descr' is not a string (", value,
                                  "); structured dtypes are not supported"));
  }
  const size_t end = value.find(value.front(), 1);
  if (end == absl::string_view::npos) return Bad(path, "malformed .npy header: unterminated descr");
  const absl::string_view d = value.substr(1, end - 1);
  if (d == "<f4") return NpyDType::kFloat32;
  if (d == "|u1" || d == "<u1" || d == ">u1") return NpyDType::kUInt8;
  if (d == "<i4") return NpyDType::kInt32;
  if (d == "<i8") return NpyDType::kInt64;
  const bool big = !d.empty() && d.front() == '>';
  return Bad(path, absl::StrCat("dtype '", d, "' is not supported",
                                big ? " (big-endian; save it little-endian)" : "", "; ",
                                kSupported));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view value, const std::string& path) {
  const size_t close = value.find(')');
  if (value.empty() || value.front() != '(' || close == absl::string_view::npos) {
    return Bad(path, absl::StrCat("malformed .npy header: 'shape' is not a tuple (", value, ")"));
  }
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(value.substr(1, close - 1), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;  // "(5,)" and "()"
    if (absl::EndsWith(part, "L")) part.remove_suffix(1);  // Python 2 longs
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return Bad(path, absl::StrCat("malformed .npy header: bad dimension '", part, "' in shape"));
    }
    shape.push_back(d);
  }
  return shape;
}

}  // namespace

int NpyDTypeSize(NpyDType t) {
  switch (t) {
    case NpyDType::kUInt8: return 1;
    case NpyDType::kFloat32:
    case NpyDType::kInt32: return 4;
    case NpyDType::kInt64: return 8;
  }
  return 0;
}

const char* NpyDTypeName(NpyDType t) {
  switch (t) {
    case NpyDType::kFloat32: return "float32";
    case NpyDType::kUInt8: return "uint8";
    case NpyDType::kInt32: return "int32";
    case NpyDType::kInt64: return "int64";
  }
  return "?";
}

const char* NpyDTypeDescr(NpyDType t) {
  switch (t) {
    case NpyDType::kFloat32: return "<f4";
    case NpyDType::kUInt8: return "|u1";
    case NpyDType::kInt32: return "<i4";
    case NpyDType::kInt64: return "<i8";
  }
  return "?";
}

int64_t NpyArray::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<NpyHeader> ParseNpyHeader(absl::string_view bytes, const std::string& path) {
  if (bytes.size() < kMagicBytes + 2 || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0) {
    return Bad(path, "not a .npy file (it does not start with \\x93NUMPY); save arrays with "
                     "numpy.save");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  if (major < 1 || major > 3) {
    return Bad(path, absl::StrCat(".npy format version ", major, ".",
                                  static_cast<int>(static_cast<uint8_t>(bytes[7])),
                                  " is not supported (1.0, 2.0 and 3.0 are)"));
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < kMagicBytes + 2 + len_bytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated in the .npy header (",
                                            bytes.size(), " bytes)"));
  }
  uint32_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + 8, len_bytes);  // little-endian
  const size_t start = kMagicBytes + 2 + len_bytes;
  if (bytes.size() < start + header_len) {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated in the .npy header (it says ", header_len, " bytes from offset ",
        start, ", the file has ", bytes.size(), "); was it written completely?"));
  }
  const absl::string_view dict = bytes.substr(start, header_len);
  NpyHeader h;
  h.data_offset = static_cast<int64_t>(start + header_len);
  ASSIGN_OR_RETURN(absl::string_view descr, ValueOf(dict, "descr", path));
  ASSIGN_OR_RETURN(h.dtype, ParseDescr(descr, path));
  ASSIGN_OR_RETURN(absl::string_view order, ValueOf(dict, "fortran_order", path));
  if (absl::StartsWith(order, "True")) {
    return Bad(path, "the array is in Fortran order; save a C-ordered copy: "
                     "np.save(path, np.ascontiguousarray(X))");
  }
  if (!absl::StartsWith(order, "False")) {
    return Bad(path, absl::StrCat("malformed .npy header: fortran_order is ", order));
  }
  ASSIGN_OR_RETURN(absl::string_view shape, ValueOf(dict, "shape", path));
  ASSIGN_OR_RETURN(h.shape, ParseShape(shape, path));
  return h;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (!bytes.ok()) return bytes.status();
  ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(*bytes, path));
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  const int64_t want = a.elements() * NpyDTypeSize(a.dtype);
  const int64_t have = static_cast<int64_t>(bytes->size()) - h.data_offset;
  if (have != want) {
    return absl::DataLossError(absl::StrCat(
        path, ": ", have < want ? "truncated" : "has extra bytes", ": shape (",
        absl::StrJoin(a.shape, ", "), ") of ", NpyDTypeName(a.dtype), " needs ", want,
        " bytes of data from offset ", h.data_offset, ", the file has ", have,
        "; was it written completely?"));
  }
  a.data = *std::move(bytes);
  a.data.erase(0, h.data_offset);  // in place: one copy of a large array, not two
  return a;
}

absl::Status WriteNpyFile(const std::string& path, const NpyArray& array) {
  if (static_cast<int64_t>(array.data.size()) != array.elements() * NpyDTypeSize(array.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("WriteNpyFile ", path, ": ",
                                                   array.data.size(),
                                                   " data bytes do not match the shape"));
  }
  std::string shape = absl::StrJoin(array.shape, ", ");
  if (array.shape.size() == 1) shape += ",";
  std::string dict = absl::StrCat("{'descr': '", NpyDTypeDescr(array.dtype),
                                  "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Padded with spaces and a newline so the data starts 64-byte aligned.
  const size_t unpadded = kMagicBytes + 2 + 2 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicBytes);
  out.push_back('\x01');
  out.push_back('\x00');
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out.append(reinterpret_cast<const char*>(&len), 2);
  out += dict;
  out += array.data;
  return WriteFileAtomically(path, out);
}

}  // namespace data
}  // namespace tandem
