#include "common/data/record_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace data {
namespace {

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }  // LE hosts
void Put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "record shards are little-endian; add byte swaps here");

absl::Status IoError(const std::string& path, const char* what) {
  return absl::UnavailableError(
      absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

// ---------------------------------------------------------------- writer

absl::StatusOr<std::unique_ptr<RecordShardWriter>> RecordShardWriter::Create(
    const std::string& path, absl::string_view metadata) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return IoError(tmp, "cannot create shard");
  uint8_t header[kRecordShardHeaderBytes] = {};
  if (std::fwrite(header, 1, sizeof(header), f) != sizeof(header) ||
      std::fwrite(metadata.data(), 1, metadata.size(), f) != metadata.size()) {
    std::fclose(f);
    std::remove(tmp.c_str());
    return IoError(tmp, "write failed");
  }
  return std::unique_ptr<RecordShardWriter>(new RecordShardWriter(
      path, f, kRecordShardHeaderBytes + metadata.size(),
      std::string(metadata)));
}

RecordShardWriter::RecordShardWriter(std::string path, std::FILE* file,
                                     uint64_t offset, std::string metadata)
    : path_(std::move(path)),
      file_(file),
      offset_(offset),
      metadata_(std::move(metadata)) {}

RecordShardWriter::~RecordShardWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) std::remove((path_ + ".tmp").c_str());
}

absl::Status RecordShardWriter::Add(absl::string_view record) {
  if (finished_ || file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": Add after Finish"));
  }
  if (!record.empty() &&
      std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return IoError(path_ + ".tmp", "write failed");
  }
  index_.push_back({offset_, record.size(), Crc32c(record.data(), record.size())});
  offset_ += record.size();
  return absl::OkStatus();
}

absl::Status RecordShardWriter::Finish() {
  if (finished_ || file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": Finish called twice"));
  }
  const std::string tmp = path_ + ".tmp";
  std::vector<uint8_t> index(index_.size() * kRecordShardIndexEntryBytes, 0);
  for (size_t i = 0; i < index_.size(); ++i) {
    uint8_t* e = index.data() + i * kRecordShardIndexEntryBytes;
    Put64(e, index_[i].offset);
    Put64(e + 8, index_[i].size);
    Put32(e + 16, index_[i].crc);
  }
  uint8_t header[kRecordShardHeaderBytes] = {};
  std::memcpy(header, kRecordShardMagic, 8);
  Put32(header + 8, kRecordShardVersion);
  Put64(header + 16, index_.size());
  Put64(header + 24, offset_);
  Put64(header + 32, metadata_.size());
  Put32(header + 40, Crc32c(metadata_.data(), metadata_.size()));
  Put32(header + 44, Crc32c(index.data(), index.size()));
  Put32(header + 60, Crc32c(header, 60));
  bool ok = std::fwrite(index.data(), 1, index.size(), file_) == index.size();
  ok = ok && std::fseek(file_, 0, SEEK_SET) == 0;
  ok = ok && std::fwrite(header, 1, sizeof(header), file_) == sizeof(header);
  ok = ok && std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  if (!ok) return IoError(tmp, "writing index/header failed");
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) return IoError(tmp, "close failed");
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    return IoError(path_, "rename into place failed");
  }
  finished_ = true;
  return absl::OkStatus();
}

// ---------------------------------------------------------------- reader

absl::StatusOr<std::unique_ptr<RecordShardReader>> RecordShardReader::Open(
    const std::string& path, RecordShardReaderOptions options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no such shard file; check the dataset path"));
    }
    return IoError(path, "cannot open shard");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return IoError(path, "fstat failed");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* base = nullptr;
  if (size > 0) {
    void* m = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return IoError(path, "mmap failed");
    }
    base = static_cast<const uint8_t*>(m);
  }
  ::close(fd);  // the mapping keeps the file alive
  std::unique_ptr<RecordShardReader> reader(
      new RecordShardReader(path, base, size, options));
  RETURN_IF_ERROR(reader->Validate());
  return reader;
}

RecordShardReader::RecordShardReader(std::string path, const uint8_t* base,
                                     size_t size,
                                     RecordShardReaderOptions options)
    : path_(std::move(path)), base_(base), size_(size), options_(options) {}

RecordShardReader::~RecordShardReader() {
  if (base_ != nullptr) munmap(const_cast<uint8_t*>(base_), size_);
}

absl::Status RecordShardReader::Validate() {
  if (size_ < static_cast<size_t>(kRecordShardHeaderBytes)) {
    return absl::DataLossError(absl::StrCat(
        path_, ": truncated at offset ", size_, ": a shard header needs ",
        kRecordShardHeaderBytes, " bytes; regenerate the shard"));
  }
  if (std::memcmp(base_, kRecordShardMagic, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": not a tandem record shard (bad magic at offset 0)"));
  }
  const uint32_t version = Get32(base_ + 8);
  if (version != kRecordShardVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": shard version ", version, " at offset 8 is not supported "
        "(this build reads version ", kRecordShardVersion, ")"));
  }
  if (Crc32c(base_, 60) != Get32(base_ + 60)) {
    return absl::DataLossError(absl::StrCat(
        path_, ": header checksum mismatch (bytes 0..59, checksum at offset "
        "60); the file is corrupt"));
  }
  num_records_ = Get64(base_ + 16);
  const uint64_t index_offset = Get64(base_ + 24);
  const uint64_t metadata_size = Get64(base_ + 32);
  const uint64_t metadata_end = kRecordShardHeaderBytes + metadata_size;
  if (metadata_size > size_ || metadata_end > size_ || index_offset > size_) {
    return absl::DataLossError(absl::StrCat(
        path_, ": truncated: the index starts at offset ", index_offset,
        " but the file ends at offset ", size_, "; regenerate the shard"));
  }
  const uint64_t index_bytes = num_records_ * kRecordShardIndexEntryBytes;
  if (index_offset < metadata_end || index_offset > size_ ||
      index_bytes / kRecordShardIndexEntryBytes != num_records_ ||
      index_offset + index_bytes != size_) {
    return absl::DataLossError(absl::StrCat(
        path_, ": truncated or extended: header says ", num_records_,
        " records with the index at offset ", index_offset, " ending at ",
        index_offset + index_bytes, ", but the file ends at offset ", size_,
        "; regenerate the shard"));
  }
  metadata_ = absl::string_view(
      reinterpret_cast<const char*>(base_ + kRecordShardHeaderBytes),
      metadata_size);
  if (Crc32c(metadata_.data(), metadata_.size()) != Get32(base_ + 40)) {
    return absl::DataLossError(absl::StrCat(
        path_, ": metadata checksum mismatch (offsets ",
        kRecordShardHeaderBytes, "..", metadata_end, "); the file is corrupt"));
  }
  index_ = base_ + index_offset;
  if (Crc32c(index_, index_bytes) != Get32(base_ + 44)) {
    return absl::DataLossError(absl::StrCat(
        path_, ": index checksum mismatch (index at offset ", index_offset,
        "); the file is corrupt"));
  }
  for (uint64_t i = 0; i < num_records_; ++i) {
    const uint8_t* e = index_ + i * kRecordShardIndexEntryBytes;
    const uint64_t off = Get64(e);
    const uint64_t len = Get64(e + 8);
    if (off < metadata_end || off > index_offset || len > index_offset - off) {
      return absl::DataLossError(absl::StrCat(
          path_, ": index entry ", i, " at offset ",
          index_offset + i * kRecordShardIndexEntryBytes,
          " points outside the records (", off, "+", len, ")"));
    }
  }
  return absl::OkStatus();
}

int64_t RecordShardReader::record_size(int64_t i) const {
  return static_cast<int64_t>(
      Get64(index_ + i * kRecordShardIndexEntryBytes + 8));
}

absl::StatusOr<absl::string_view> RecordShardReader::Read(int64_t i) const {
  return ReadChecked(i, options_.verify_checksums);
}

absl::StatusOr<absl::string_view> RecordShardReader::ReadChecked(
    int64_t i, bool verify) const {
  if (i < 0 || static_cast<uint64_t>(i) >= num_records_) {
    return absl::OutOfRangeError(absl::StrCat(
        path_, ": record ", i, " out of range [0, ", num_records_, ")"));
  }
  const uint8_t* e = index_ + i * kRecordShardIndexEntryBytes;
  const uint64_t off = Get64(e);
  const uint64_t len = Get64(e + 8);
  absl::string_view rec(reinterpret_cast<const char*>(base_ + off), len);
  if (verify && Crc32c(rec.data(), rec.size()) != Get32(e + 16)) {
    return absl::DataLossError(absl::StrCat(
        path_, ": checksum mismatch in record ", i, " (bytes ", off, "..",
        off + len, "); the file is corrupt, regenerate it"));
  }
  return rec;
}

absl::Status RecordShardReader::VerifyAll() const {
  for (uint64_t i = 0; i < num_records_; ++i) {
    RETURN_IF_ERROR(ReadChecked(static_cast<int64_t>(i), true).status());
  }
  return absl::OkStatus();
}

}  // namespace data
}  // namespace tandem
