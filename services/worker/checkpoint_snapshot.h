// CheckpointSnapshot: the host copy of one checkpoint shard that a
// background checkpoint takes at a step boundary, so the file can be written
// while training goes on (services/worker/background_checkpoint.h).
//
//   CheckpointSnapshot snap;                 // one per writer, reused
//   snap.Capture(view);                      // the trainer thread, between steps
//   ...                                      // training changes the live state
//   RETURN_IF_ERROR(snap.Write(path, {}));   // the writer thread
//
// It is the checkpoint file's image (common/checkpoint/checkpoint_image.h):
// Capture lays the file out in one page-aligned buffer and copies each
// parameter, optimizer and strategy buffer into it with one memcpy (the only
// part on the training thread); the writer thread computes the checksums and
// writes it with O_DIRECT, so the kernel neither copies it into the page
// cache nor writes it back later. After the first checkpoint a capture
// allocates nothing (the state's sizes do not change within a run). The
// file is byte-identical to one written from the view it captured. On
// device backends the parameters arrive through the checkpointer's host
// staging copy first (pinned where a GPU is usable), so this copy is host
// to host. Memory: bytes() — the shard's file size rounded up to 4 KiB.
// Thread-compatible: one thread captures, then hands the object to one
// writer; the owner sequences the two.
#ifndef TANDEM_SERVICES_WORKER_CHECKPOINT_SNAPSHOT_H_
#define TANDEM_SERVICES_WORKER_CHECKPOINT_SNAPSHOT_H_

#include "common/checkpoint/checkpoint_image.h"

namespace tandem {
namespace worker {

using CheckpointSnapshot = checkpoint::CheckpointImage;

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_CHECKPOINT_SNAPSHOT_H_
