// CheckpointSnapshot: a host copy of one checkpoint shard, taken at a step
// boundary so the file can be written while training goes on (background
// checkpoints, services/worker/background_checkpoint.h).
//
//   CheckpointSnapshot snap;                 // one per process, reused
//   snap.Capture(view);                      // the trainer thread, between steps
//   ...                                      // training changes the live state
//   RETURN_IF_ERROR(checkpoint::WriteCheckpoint(path, snap.View()));  // another thread
//
// Capture copies everything the view points at (parameters, optimizer state,
// blobs) into buffers that keep their capacity: after the first checkpoint a
// capture allocates nothing (the state's sizes do not change within a run).
// The file written from View() is byte-identical to one written from the
// view it captured. On device backends the parameters arrive through the
// checkpointer's host staging copy first (CopyToHost), so this copy is
// host to host; a pinned staging buffer is not used yet (docs/architecture.md).
// Memory: bytes() — parameters, optimizer state and strategy state of the
// shard, plus the small blobs. Thread-compatible: one thread captures, then
// hands the object to one writer; the owner sequences the two.
#ifndef TANDEM_SERVICES_WORKER_CHECKPOINT_SNAPSHOT_H_
#define TANDEM_SERVICES_WORKER_CHECKPOINT_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/checkpoint/checkpoint.h"

namespace tandem {
namespace worker {

class CheckpointSnapshot {
 public:
  CheckpointSnapshot() = default;
  CheckpointSnapshot(const CheckpointSnapshot&) = delete;
  CheckpointSnapshot& operator=(const CheckpointSnapshot&) = delete;

  // Copies `v` and everything it points at.
  void Capture(const checkpoint::CheckpointView& v);
  // A view of the copy (valid until the next Capture).
  checkpoint::CheckpointView View() const;
  // Bytes held by the copy's payloads.
  int64_t bytes() const;
  int64_t step() const { return step_; }

 private:
  uint64_t fingerprint_ = 0;
  int64_t step_ = -1, total_ = 0, lo_ = 0, hi_ = 0;
  std::vector<float> params_;
  std::string optimizer_name_;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer_state_;
  std::vector<std::pair<std::string, std::string>> blobs_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_CHECKPOINT_SNAPSHOT_H_
