// tandem's record-shard format: a file of opaque records with a per-record
// checksum and an index, read through mmap without copying.
//
// Layout (all integers little-endian):
//
//   offset 0   header, 64 bytes
//                0  char[8] magic "TNDSHARD"
//                8  u32     version (1)
//               12  u32     reserved (0)
//               16  u64     num_records
//               24  u64     index_offset
//               32  u64     metadata_size (metadata starts at offset 64)
//               40  u32     metadata_crc   (CRC-32C of the metadata)
//               44  u32     index_crc      (CRC-32C of the whole index)
//               48  u8[12]  reserved (0)
//               60  u32     header_crc     (CRC-32C of bytes 0..59)
//   64         metadata: metadata_size opaque bytes (tandem stores a
//              serialized tandem.v1.DatasetInfo there; see shard_dataset)
//   ...        records: payloads back to back, in order
//   index_offset
//              index: num_records entries of 24 bytes
//                0  u64 offset of the record's payload
//                8  u64 size of the payload
//               16  u32 CRC-32C of the payload
//               20  u32 reserved (0)
//   end of file == index_offset + 24 * num_records
//
// The writer fills the header last and renames a temporary file into place,
// so a crashed writer never leaves a file that looks complete.
//
// RecordShardWriter: not thread-safe; owns its file. RecordShardReader:
// immutable after Open, thread-safe; owns the mapping; record views stay
// valid while the reader lives. Every failure names the file and the byte
// offset involved: NOT_FOUND (no file), DATA_LOSS (truncated file, checksum
// mismatch, index pointing outside the records), INVALID_ARGUMENT (not a
// shard, unknown version).
#ifndef TANDEM_COMMON_DATA_RECORD_SHARD_H_
#define TANDEM_COMMON_DATA_RECORD_SHARD_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace data {

inline constexpr char kRecordShardMagic[8] = {'T', 'N', 'D', 'S',
                                              'H', 'A', 'R', 'D'};
inline constexpr uint32_t kRecordShardVersion = 1;
inline constexpr int64_t kRecordShardHeaderBytes = 64;
inline constexpr int64_t kRecordShardIndexEntryBytes = 24;

class RecordShardWriter {
 public:
  // Creates `path` (through `path`.tmp, renamed by Finish) holding
  // `metadata`. Fails UNAVAILABLE when the file cannot be created.
  static absl::StatusOr<std::unique_ptr<RecordShardWriter>> Create(
      const std::string& path, absl::string_view metadata);

  ~RecordShardWriter();  // abandons (deletes the temp file) unless Finished
  RecordShardWriter(const RecordShardWriter&) = delete;
  RecordShardWriter& operator=(const RecordShardWriter&) = delete;

  absl::Status Add(absl::string_view record);
  // Writes the index and header, fsyncs and renames into place.
  absl::Status Finish();

  int64_t num_records() const { return static_cast<int64_t>(index_.size()); }

 private:
  struct Entry {
    uint64_t offset;
    uint64_t size;
    uint32_t crc;
  };
  RecordShardWriter(std::string path, std::FILE* file, uint64_t offset,
                    std::string metadata);

  std::string path_;
  std::FILE* file_;
  uint64_t offset_;
  std::string metadata_;
  std::vector<Entry> index_;
  bool finished_ = false;
};

struct RecordShardReaderOptions {
  // Check each record's CRC-32C when it is read (costs a pass over the
  // bytes, a few GB/s per core). Default true.
  bool verify_checksums = true;
};

class RecordShardReader {
 public:
  // Maps `path` and validates header, metadata and index (O(index), not
  // O(file)); record payloads are checked lazily by Read.
  static absl::StatusOr<std::unique_ptr<RecordShardReader>> Open(
      const std::string& path, RecordShardReaderOptions options = {});

  ~RecordShardReader();
  RecordShardReader(const RecordShardReader&) = delete;
  RecordShardReader& operator=(const RecordShardReader&) = delete;

  int64_t num_records() const { return static_cast<int64_t>(num_records_); }
  absl::string_view metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

  // Size of record i without touching its bytes; i must be in range.
  int64_t record_size(int64_t i) const;

  // A view of record i (valid while the reader lives). OUT_OF_RANGE for a
  // bad index; DATA_LOSS naming file, record and offset on a bad checksum.
  absl::StatusOr<absl::string_view> Read(int64_t i) const;

  // Checks every record's checksum; the first failure is returned.
  absl::Status VerifyAll() const;

 private:
  RecordShardReader(std::string path, const uint8_t* base, size_t size,
                    RecordShardReaderOptions options);
  absl::Status Validate();
  absl::StatusOr<absl::string_view> ReadChecked(int64_t i, bool verify) const;

  std::string path_;
  const uint8_t* base_;
  size_t size_;
  RecordShardReaderOptions options_;
  uint64_t num_records_ = 0;
  const uint8_t* index_ = nullptr;
  absl::string_view metadata_;
};

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_RECORD_SHARD_H_
