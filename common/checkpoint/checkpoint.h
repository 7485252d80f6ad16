// Checkpoint files: parameters + optimizer state + step + opaque blobs (data
// cursor, loss-scaler state, ...) for one range [lo, hi) of a model's flat
// parameter vector, written atomically and checksummed.
//
//   CheckpointView v;
//   v.model_fingerprint = ModelFingerprint(spec_and_layout);
//   v.step = applied_steps;  v.total_params = n;  v.range_lo = lo;  v.range_hi = hi;
//   v.params = absl::MakeConstSpan(params + lo, hi - lo);
//   AddOptimizerState(*optimizer, &v);
//   v.blobs.push_back({"data_cursor", cursor_bytes});
//   RETURN_IF_ERROR(WriteCheckpoint(dir + "/step-000100.tckpt", v));
//   ...
//   ReadOptions ro;  ro.expected_model_fingerprint = v.model_fingerprint;
//   ASSIGN_OR_RETURN(Checkpoint c, ReadCheckpoint(path, ro));
//   RETURN_IF_ERROR(RestoreOptimizerState(c, optimizer.get()));
//
// Atomicity: the file is written to "<path>.tmp.<pid>.<n>" in the same
// directory, fsynced, renamed over <path>, and the directory is fsynced, so
// a crash leaves either the old file or the new one, never a mix. A failed
// write removes its temporary file.
//
// File layout (version 1, all integers little-endian):
//
//   offset  size  field
//   0       8     magic "TNDMCKPT"
//   8       4     u32 format version (1)
//   12      4     u32 header size (64)
//   16      8     u64 model fingerprint
//   24      8     i64 step (number of optimizer updates applied)
//   32      8     i64 total_params (length of the full flat vector)
//   40      8     i64 range_lo
//   48      8     i64 range_hi
//   56      4     u32 section count
//   60      4     u32 CRC32C of bytes [0, 60)
//   64            sections, back to back, each:
//                   u32 type (1 = fp32 array, 2 = bytes)
//                   u32 name length L (1..255)
//                   u64 payload length P in bytes (fp32: a multiple of 4)
//                   L bytes name, P bytes payload
//                   u32 CRC32C of the 16-byte section header, name, payload
//   end-16  8     magic "TNDMEND\0"
//   end-8   8     u64 file size (including this footer)
//
// Sections: "params" (fp32, hi - lo values; always first), "optimizer"
// (bytes: the optimizer's name, if any), "optim/<buffer>" (fp32, hi - lo
// values each), "blob/<name>" (bytes). Floats are stored as their raw bits,
// so reading back is bit-for-bit (NaN payloads included).
//
// Failure: every error names the file. Missing file: NotFound. Truncated,
// bit-flipped or otherwise malformed file: DataLoss, with the offset and the
// section where useful. A checkpoint of another model (fingerprint
// mismatch): FailedPrecondition. Bad writer input: InvalidArgument. I/O
// errors: the errno text (Internal / PermissionDenied, ...).
// Thread-safety: the functions are thread-safe for distinct paths.
#ifndef TANDEM_COMMON_CHECKPOINT_CHECKPOINT_H_
#define TANDEM_COMMON_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace checkpoint {

// A checkpoint to write, by reference: nothing is copied. The spans and
// string_views must stay valid during WriteCheckpoint().
struct CheckpointView {
  uint64_t model_fingerprint = 0;
  int64_t step = 0;
  int64_t total_params = 0;
  int64_t range_lo = 0;
  int64_t range_hi = 0;
  absl::Span<const float> params;  // range_hi - range_lo values
  std::string optimizer_name;      // empty: no optimizer section
  std::vector<std::pair<std::string, absl::Span<const float>>> optimizer_state;
  std::vector<std::pair<std::string, absl::string_view>> blobs;
};

// A checkpoint read back (owns its data).
struct Checkpoint {
  uint64_t model_fingerprint = 0;
  int64_t step = 0;
  int64_t total_params = 0;
  int64_t range_lo = 0;
  int64_t range_hi = 0;
  std::vector<float> params;
  std::string optimizer_name;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer_state;
  std::vector<std::pair<std::string, std::string>> blobs;

  // nullptr if absent.
  const std::string* FindBlob(absl::string_view name) const;
  const std::vector<float>* FindOptimizerState(absl::string_view name) const;
};

struct ReadOptions {
  // If set, a checkpoint with another fingerprint is refused
  // (FailedPrecondition). Leave unset only in tools that inspect files.
  std::optional<uint64_t> expected_model_fingerprint;
};

// Fault injection for tests (the Env pattern): `before_write` runs before
// each write(2) of the temporary file with the bytes written so far and the
// size of the next write; an error it returns fails the write there, mid-file,
// as a full disk would (the temporary file is removed, `path` is untouched).
// It may also block, to hold a writer mid-file while a test looks on.
struct WriteOptions {
  std::function<absl::Status(uint64_t offset, uint64_t bytes)> before_write;
};

absl::Status WriteCheckpoint(const std::string& path, const CheckpointView& view);
absl::Status WriteCheckpoint(const std::string& path, const CheckpointView& view,
                             const WriteOptions& options);

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path,
                                          const ReadOptions& options);

// 64-bit FNV-1a of a description of the model: put everything that must
// match for parameters to be interchangeable (the model spec, and each
// parameter's name, offset and size from the layout) into the string.
uint64_t ModelFingerprint(absl::string_view model_description);

// Points `view` at the optimizer's name and state buffers (no copy).
void AddOptimizerState(optim::Optimizer& optimizer, CheckpointView* view);

// Copies the checkpoint's optimizer state into `optimizer`. FailedPrecondition
// if the optimizer's kind or range differs from the checkpoint's, or a
// buffer is missing or of the wrong size; `optimizer` is unchanged then.
absl::Status RestoreOptimizerState(const Checkpoint& checkpoint,
                                   optim::Optimizer* optimizer);

}  // namespace checkpoint
}  // namespace tandem

#endif  // TANDEM_COMMON_CHECKPOINT_CHECKPOINT_H_
