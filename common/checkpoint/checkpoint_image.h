// CheckpointImage: a checkpoint file's bytes, laid out in one page-aligned
// host buffer, for writers that copy the state at a step boundary and write
// it later from another thread (background checkpoints,
// services/worker/background_checkpoint.h).
//
//   CheckpointImage image;                      // one per writer, reused
//   image.Capture(view);                        // step boundary: one memcpy per buffer
//   ...                                         // training changes the live state
//   RETURN_IF_ERROR(image.Write(path, {}));     // another thread: CRCs, then the file
//
// Why an image rather than a copy of the buffers: the file can then be
// written straight from it with O_DIRECT, in large aligned pieces, without
// the kernel copying it into the page cache and writing it back later. On a
// machine whose cores training keeps busy, that copy and writeback is most
// of a checkpoint's CPU (docs/user-guide.md, "background checkpoints").
// The file is byte-identical to WriteCheckpoint(path, view) (same format
// code, checkpoint_format.h); where the file system refuses O_DIRECT
// (tmpfs) it is written through the page cache instead.
//
// Memory: bytes() — the file's size rounded up to 4 KiB; allocated at the
// first Capture and kept while the layout's size does not grow, so later
// captures allocate nothing. Thread-compatible: one thread captures, then
// hands the object to one writer; the owner sequences the two. Failure: a
// view WriteCheckpoint would refuse is remembered by Capture and returned
// by Write (InvalidArgument); I/O errors as WriteCheckpoint's.
#ifndef TANDEM_COMMON_CHECKPOINT_CHECKPOINT_IMAGE_H_
#define TANDEM_COMMON_CHECKPOINT_CHECKPOINT_IMAGE_H_

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/checkpoint/checkpoint.h"

namespace tandem {
namespace checkpoint {

struct ImageWriteOptions {
  WriteOptions write;  // test hook, called before each write of a piece
  // Write with O_DIRECT where the file system allows it (false: through the
  // page cache, as WriteCheckpoint does).
  bool direct = true;
  // The file goes out in pieces of this many bytes (a multiple of 4 KiB),
  // so a hook or a failure can land mid-file and no single call is huge.
  uint64_t piece_bytes = uint64_t{8} << 20;
};

class CheckpointImage {
 public:
  CheckpointImage() = default;
  CheckpointImage(const CheckpointImage&) = delete;
  CheckpointImage& operator=(const CheckpointImage&) = delete;

  // Lays out the file of `v` and copies everything it points at into it
  // (header, section headers and payloads; checksums are left to Write).
  void Capture(const CheckpointView& v);
  // Computes the checksums and writes the file atomically to `path` (a
  // temporary file, fsync, rename, directory fsync: WriteCheckpoint's
  // guarantees).
  absl::Status Write(const std::string& path, const ImageWriteOptions& options);

  int64_t step() const { return step_; }
  // Host bytes held (0 before the first Capture).
  int64_t bytes() const { return static_cast<int64_t>(capacity_); }
  // The file's size (0 before the first Capture).
  uint64_t file_size() const { return size_; }

 private:
  struct Section {
    uint64_t offset;  // of its 16-byte header; the CRC covers header, name, payload
    uint64_t length;  // header + name + payload
  };
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  absl::Status Reserve(uint64_t size);
  absl::Status WritePieces(int fd, bool direct, const ImageWriteOptions& options,
                           const std::string& path) const;

  std::unique_ptr<char, Free> buffer_;
  uint64_t capacity_ = 0;  // bytes allocated, a multiple of 4 KiB
  uint64_t size_ = 0;      // the file's bytes at the start of buffer_
  int64_t step_ = -1;
  std::vector<Section> sections_;
  absl::Status captured_;  // what ValidateView or the allocation said
};

}  // namespace checkpoint
}  // namespace tandem

#endif  // TANDEM_COMMON_CHECKPOINT_CHECKPOINT_IMAGE_H_
