#include "services/worker/sample_log.h"

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<SampleLog>> SampleLog::Create(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (f == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("--sample_log: cannot open ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<SampleLog>(new SampleLog(f));
}

SampleLog::~SampleLog() { std::fclose(f_); }

void SampleLog::Append(const data::HostBatch& batch) {
  const int64_t head[2] = {batch.epoch, batch.size()};
  const size_t n = static_cast<size_t>(batch.size());
  const bool ok = std::fwrite(head, sizeof(int64_t), 2, f_) == 2 &&
                  std::fwrite(batch.sample_ids.data(), sizeof(int64_t), n, f_) == n &&
                  std::fflush(f_) == 0;
  if (!ok && !warned_) {
    warned_ = true;
    LOG(WARNING) << "--sample_log: short write (" << std::strerror(errno)
                 << "); the log is incomplete";
  }
}

absl::Status ReadSampleLog(const std::string& path,
                           std::map<int64_t, std::map<int64_t, int>>* counts) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::vector<int64_t> ids;
  int64_t head[2];
  absl::Status status;
  while (std::fread(head, sizeof(int64_t), 2, f) == 2) {
    if (head[1] < 0 || head[1] > (int64_t{1} << 30)) {
      status = absl::DataLossError(absl::StrCat(path, ": bad record length ", head[1]));
      break;
    }
    ids.resize(static_cast<size_t>(head[1]));
    if (std::fread(ids.data(), sizeof(int64_t), ids.size(), f) != ids.size()) {
      status = absl::DataLossError(absl::StrCat(path, ": truncated record"));
      break;
    }
    std::map<int64_t, int>& epoch = (*counts)[head[0]];
    for (int64_t id : ids) ++epoch[id];
  }
  std::fclose(f);
  return status;
}

}  // namespace worker
}  // namespace tandem
