// SampleLog: an audit trail of the samples this rank trained on, for fault
// tests that check "no sample lost or repeated" across restarts. Off unless
// --sample_log is given.
//
//   ASSIGN_OR_RETURN(auto log, SampleLog::Create("/tmp/run/samples-worker-0.bin"));
//   log->Append(batch, generation, step);   // per micro-batch handed to the model
//
// File format (native-endian int64): per batch, epoch, generation, step
// (the optimizer step it is part of, 1-based), count, then `count` dataset
// indices. Appended and flushed per batch, so a reader sees every
// batch of a process that exited, however it exited after the flush.
// Thread-compatible (the trainer thread). Create fails with the path and
// errno; Append reports a short write once (a full disk), then stays quiet.
#ifndef TANDEM_SERVICES_WORKER_SAMPLE_LOG_H_
#define TANDEM_SERVICES_WORKER_SAMPLE_LOG_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/prefetch_client.h"

namespace tandem {
namespace worker {

class SampleLog {
 public:
  static absl::StatusOr<std::unique_ptr<SampleLog>> Create(const std::string& path);
  ~SampleLog();
  SampleLog(const SampleLog&) = delete;
  SampleLog& operator=(const SampleLog&) = delete;

  void Append(const data::HostBatch& batch, int64_t generation, int64_t step);

 private:
  explicit SampleLog(std::FILE* f) : f_(f) {}
  std::FILE* f_;
  bool warned_ = false;
};

struct SampleRecord {
  int64_t epoch = 0;
  int64_t generation = 0;
  int64_t step = 0;
  std::vector<int64_t> ids;
};

// Appends the records of a file written by SampleLog to `out`. DATA_LOSS
// for a truncated record.
absl::Status ReadSampleLog(const std::string& path, std::vector<SampleRecord>* out);

// Per epoch, how many times each sample index went into the training the
// final model went through: of each step, only the records of the newest
// generation that ran it count (a failed generation's steps after its last
// checkpoint were rolled back and re-done).
std::map<int64_t, std::map<int64_t, int>> EffectiveSampleCounts(
    const std::vector<SampleRecord>& records);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_SAMPLE_LOG_H_
