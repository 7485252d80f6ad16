// The sample order of tandem's data plane (DESIGN.md, "Data semantics").
//
// Epoch e visits a permutation of [0, num_samples) seeded by (seed, e) (the
// identity when shuffle is off). Global batch s of an epoch is positions
// [s*B, min((s+1)*B, N)) of that permutation, so it is the same set of
// samples whatever the world size. Rank r of w receives the r-th of w
// contiguous, disjoint parts of it: sizes differ by at most one, the first
// (m mod w) ranks get one more. Across ranks every sample of the epoch is
// delivered exactly once, except for the remainder policy:
//   kDrop      — the last N mod B samples of the permutation are skipped
//                (they differ from epoch to epoch when shuffling);
//   kShortLast — the last global batch has N mod B samples; with fewer than
//                w of them some ranks get an empty slice.
// A stream position is a Cursor (epoch, step_in_epoch, offset); resuming
// from the cursor after the last batch received neither loses nor repeats a
// sample.
//
// Offsets (elastic world size, dynamic batch): an epoch may be entered at a
// sample offset o, the samples of its permutation already consumed (by a
// generation with another world size or global batch). Its global batches
// are then cut from there: batch s is positions [o + s*B, min(o + (s+1)*B, N)),
// so a change of w or B at a step boundary continues from the exact sample
// where the last slicing stopped. In such an epoch (o > 0) the rest is not
// dropped: under kDrop its last, short batch is kept when it has at least w
// samples (every rank gets one), so a mid-epoch change loses nothing that
// fits. Epochs after it start at offset 0.
//
//   SamplerConfig c{.num_samples = 1001, .seed = 7, .global_batch_size = 32,
//                   .world_size = 4};
//   RETURN_IF_ERROR(ValidateSamplerConfig(c, rank));
//   EpochOrder order;
//   const std::vector<int64_t>& perm = order.Get(c, cursor.epoch);
//   IndexRange r = RankSlice(c, cursor.step_in_epoch, rank);
//   // samples perm[r.begin .. r.end)
//
// Free functions are pure and thread-safe; EpochOrder is a per-stream cache
// (not thread-safe). Invalid configurations are INVALID_ARGUMENT with a
// message that names the field.
#ifndef TANDEM_COMMON_DATA_SAMPLER_H_
#define TANDEM_COMMON_DATA_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace tandem {
namespace data {

enum class Remainder { kDrop, kShortLast };

struct SamplerConfig {
  int64_t num_samples = 0;        // N, > 0
  uint64_t seed = 0;
  int64_t global_batch_size = 0;  // B, > 0; with kDrop at most N
  int world_size = 1;             // w, > 0
  Remainder remainder = Remainder::kDrop;
  bool shuffle = true;            // false: natural order (evaluation)
};

struct Cursor {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;  // global batches since `offset`
  int64_t offset = 0;         // samples of the epoch consumed before step 0
  bool operator==(const Cursor& o) const {
    return epoch == o.epoch && step_in_epoch == o.step_in_epoch && offset == o.offset;
  }
};

// Half-open range of positions in an epoch's permutation.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// OK, or INVALID_ARGUMENT naming what is wrong (rank >= world, batch 0, ...).
absl::Status ValidateSamplerConfig(const SamplerConfig& config, int rank);
// Also checks that the cursor's offset lies in [0, N) and its step inside
// the batches cut from that offset.
absl::Status ValidateCursor(const SamplerConfig& config, const Cursor& cursor);

// Global batches per epoch: floor(N/B) for kDrop, ceil(N/B) for kShortLast.
int64_t StepsPerEpoch(const SamplerConfig& config);
// Global batches of an epoch entered at sample `offset` (see above; equals
// StepsPerEpoch at offset 0). 0 when nothing of the epoch is left to cut.
int64_t StepsInEpoch(const SamplerConfig& config, int64_t offset);
// Samples of the cursor's epoch consumed before the cursor's batch.
int64_t Position(const SamplerConfig& config, const Cursor& cursor);
// The cursor that starts `epoch` at sample `position` of its permutation
// (the next epoch's start when nothing of it is left to cut).
Cursor CursorAt(const SamplerConfig& config, int64_t epoch, int64_t position);

// Fills `out` with the permutation of epoch `epoch` (reusing its capacity).
// Deterministic across platforms: its own generator, no std distributions.
void EpochPermutation(int64_t num_samples, uint64_t seed, int64_t epoch,
                      bool shuffle, std::vector<int64_t>* out);

// Positions of global batch `step` (cut from `offset`) in the epoch's
// permutation.
IndexRange GlobalBatchRange(const SamplerConfig& config, int64_t step, int64_t offset = 0);
// Positions of rank `rank`'s part of global batch `step`.
IndexRange RankSlice(const SamplerConfig& config, int64_t step, int rank, int64_t offset = 0);
// Largest rank slice of any step: the buffer size a rank needs.
int64_t MaxLocalBatchSize(const SamplerConfig& config);

// The cursor after `cursor` (the next step, or step 0 of the next epoch).
Cursor Advance(const SamplerConfig& config, const Cursor& cursor);
bool IsLastInEpoch(const SamplerConfig& config, int64_t step, int64_t offset = 0);

// Caches one epoch's permutation so a stream computes it once per epoch.
class EpochOrder {
 public:
  const std::vector<int64_t>& Get(const SamplerConfig& config, int64_t epoch);

 private:
  bool valid_ = false;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
  uint64_t seed_ = 0;
  bool shuffle_ = false;
  std::vector<int64_t> perm_;
};

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_SAMPLER_H_
