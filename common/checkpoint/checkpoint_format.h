// Internal to common/checkpoint: the pieces of the checkpoint file format
// (checkpoint.h documents the layout) shared by the streaming writer
// (WriteCheckpoint) and the in-memory file image (checkpoint_image.h), so
// both produce the same bytes, and the atomic write both go through.
// Not for use outside this package. Thread-safe (no shared state).
#ifndef TANDEM_COMMON_CHECKPOINT_CHECKPOINT_FORMAT_H_
#define TANDEM_COMMON_CHECKPOINT_CHECKPOINT_FORMAT_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/checkpoint.h"

namespace tandem {
namespace checkpoint {
namespace internal {

inline constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'C', 'K', 'P', 'T'};
inline constexpr char kEndMagic[8] = {'T', 'N', 'D', 'M', 'E', 'N', 'D', '\0'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kMaxNameLength = 255;
inline constexpr absl::string_view kParamsSection = "params";
inline constexpr absl::string_view kOptimizerSection = "optimizer";
inline constexpr absl::string_view kOptimPrefix = "optim/";
inline constexpr absl::string_view kBlobPrefix = "blob/";
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint32_t kHeaderCrcOffset = 60;
inline constexpr uint64_t kSectionHeaderSize = 16;
inline constexpr uint64_t kFooterSize = 16;
inline constexpr uint32_t kTypeF32 = 1;
inline constexpr uint32_t kTypeBytes = 2;

template <typename T>
void PutAt(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// InvalidArgument naming `path` when `v` cannot be written (range, sizes,
// names).
absl::Status ValidateView(const std::string& path, const CheckpointView& v);

// The file's 64-byte header for `v`, its CRC included.
void EncodeHeader(const CheckpointView& v, char out[kHeaderSize]);
// A section's 16-byte header.
void EncodeSectionHeader(uint32_t type, uint64_t name_size, uint64_t payload_size,
                         char out[kSectionHeaderSize]);
// The 16-byte footer of a file of `file_size` bytes.
void EncodeFooter(uint64_t file_size, char out[kFooterSize]);

// Calls `section` for each section of `v`, in file order.
using SectionFn = std::function<absl::Status(uint32_t type, const std::string& name,
                                             const void* payload, uint64_t size)>;
absl::Status ForEachSection(const CheckpointView& v, const SectionFn& section);

// An errno as a Status naming the file and the operation.
absl::Status ErrnoError(absl::string_view what, const std::string& path, int err);

// Creates "<path>.tmp.<pid>.<n>", lets `body` write it (fd; `direct`: opened
// with O_DIRECT, which `body` may clear with fcntl), fsyncs, closes, renames
// it over `path` and fsyncs the directory. On failure the temporary file is
// removed and `path` is untouched. `try_direct` asks for O_DIRECT; a file
// system that refuses it gets a buffered file.
absl::Status WriteAtomically(const std::string& path, bool try_direct,
                             const std::function<absl::Status(int fd, bool direct)>& body);

}  // namespace internal
}  // namespace checkpoint
}  // namespace tandem

#endif  // TANDEM_COMMON_CHECKPOINT_CHECKPOINT_FORMAT_H_
