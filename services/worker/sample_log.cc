#include "services/worker/sample_log.h"

#include <algorithm>
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

void SampleLog::Append(const data::HostBatch& batch, int64_t generation, int64_t step) {
  const int64_t head[4] = {batch.epoch, generation, step, batch.size()};
  const size_t n = static_cast<size_t>(batch.size());
  const bool ok = std::fwrite(head, sizeof(int64_t), 4, f_) == 4 &&
                  std::fwrite(batch.sample_ids.data(), sizeof(int64_t), n, f_) == n &&
                  std::fflush(f_) == 0;
  if (!ok && !warned_) {
    warned_ = true;
    LOG(WARNING) << "--sample_log: short write (" << std::strerror(errno)
                 << "); the log is incomplete";
  }
}

absl::Status ReadSampleLog(const std::string& path, std::vector<SampleRecord>* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  int64_t head[4];
  absl::Status status;
  while (std::fread(head, sizeof(int64_t), 4, f) == 4) {
    if (head[3] < 0 || head[3] > (int64_t{1} << 30)) {
      status = absl::DataLossError(absl::StrCat(path, ": bad record length ", head[3]));
      break;
    }
    SampleRecord r;
    r.epoch = head[0];
    r.generation = head[1];
    r.step = head[2];
    r.ids.resize(static_cast<size_t>(head[3]));
    if (std::fread(r.ids.data(), sizeof(int64_t), r.ids.size(), f) != r.ids.size()) {
      status = absl::DataLossError(absl::StrCat(path, ": truncated record"));
      break;
    }
    out->push_back(std::move(r));
  }
  std::fclose(f);
  return status;
}

std::map<int64_t, std::map<int64_t, int>> EffectiveSampleCounts(
    const std::vector<SampleRecord>& records) {
  std::map<int64_t, int64_t> newest;  // step -> newest generation that ran it
  for (const SampleRecord& r : records) {
    int64_t& g = newest[r.step];
    g = std::max(g, r.generation);
  }
  std::map<int64_t, std::map<int64_t, int>> counts;
  for (const SampleRecord& r : records) {
    if (r.generation != newest[r.step]) continue;
    std::map<int64_t, int>& epoch = counts[r.epoch];
    for (int64_t id : r.ids) ++epoch[id];
  }
  return counts;
}

}  // namespace worker
}  // namespace tandem
