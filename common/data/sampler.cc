#include "common/data/sampler.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace data {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (Lemire's method).
uint64_t Bounded(uint64_t* state, uint64_t bound) {
  unsigned __int128 m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

}  // namespace

absl::Status ValidateSamplerConfig(const SamplerConfig& c, int rank) {
  if (c.num_samples <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the dataset has ", c.num_samples, " samples; need > 0"));
  }
  if (c.global_batch_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size is ", c.global_batch_size, "; it must be > 0"));
  }
  if (c.world_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size is ", c.world_size, "; it must be > 0"));
  }
  if (rank < 0 || rank >= c.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " is outside [0, world_size=", c.world_size, ")"));
  }
  if (c.remainder == Remainder::kDrop && c.global_batch_size > c.num_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batch_size ", c.global_batch_size, " exceeds the ",
        c.num_samples, " samples of the dataset, so the DROP policy leaves "
        "no batch; use a smaller batch or SHORT_LAST"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCursor(const SamplerConfig& c, const Cursor& cursor) {
  if (cursor.epoch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch ", cursor.epoch, " is negative"));
  }
  if (cursor.offset < 0 || cursor.offset >= c.num_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_position ", cursor.offset, " is outside the epoch's ", c.num_samples,
        " samples [0, ", c.num_samples, ")"));
  }
  const int64_t steps = StepsInEpoch(c, cursor.offset);
  if (steps == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_position ", cursor.offset, " leaves ", c.num_samples - cursor.offset,
        " samples of the epoch, too few for a global batch of ", c.global_batch_size,
        " over ", c.world_size, " ranks: start the next epoch instead"));
  }
  if (cursor.step_in_epoch < 0 || cursor.step_in_epoch >= steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step_in_epoch ", cursor.step_in_epoch, " is outside the epoch's ",
        steps, " steps", cursor.offset > 0 ? absl::StrCat(" from sample ", cursor.offset) : ""));
  }
  return absl::OkStatus();
}

int64_t StepsPerEpoch(const SamplerConfig& c) { return StepsInEpoch(c, 0); }

int64_t StepsInEpoch(const SamplerConfig& c, int64_t offset) {
  if (c.global_batch_size <= 0 || offset < 0 || offset >= c.num_samples) return 0;
  const int64_t rest = c.num_samples - offset;
  const int64_t whole = rest / c.global_batch_size;
  const int64_t tail = rest % c.global_batch_size;
  if (c.remainder == Remainder::kShortLast) return whole + (tail > 0 ? 1 : 0);
  // kDrop: an epoch entered at an offset keeps a short last batch that
  // gives every rank a sample (see the header).
  return whole + (offset > 0 && tail >= c.world_size ? 1 : 0);
}

int64_t Position(const SamplerConfig& c, const Cursor& cursor) {
  return std::min(c.num_samples, cursor.offset + cursor.step_in_epoch * c.global_batch_size);
}

Cursor CursorAt(const SamplerConfig& c, int64_t epoch, int64_t position) {
  if (position <= 0) return {epoch, 0, 0};
  if (StepsInEpoch(c, position) == 0) return {epoch + 1, 0, 0};
  return {epoch, 0, position};
}

void EpochPermutation(int64_t n, uint64_t seed, int64_t epoch, bool shuffle,
                      std::vector<int64_t>* out) {
  out->resize(n);
  std::iota(out->begin(), out->end(), int64_t{0});
  if (!shuffle || n < 2) return;
  // Mix seed and epoch so neighbouring (seed, epoch) pairs are unrelated.
  uint64_t s = seed;
  uint64_t state = SplitMix64(&s) ^ static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull;
  SplitMix64(&state);
  int64_t* p = out->data();
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(Bounded(&state, i + 1));
    std::swap(p[i], p[j]);
  }
}

IndexRange GlobalBatchRange(const SamplerConfig& c, int64_t step, int64_t offset) {
  const int64_t begin = offset + step * c.global_batch_size;
  return {begin, std::min(begin + c.global_batch_size, c.num_samples)};
}

IndexRange RankSlice(const SamplerConfig& c, int64_t step, int rank, int64_t offset) {
  const IndexRange g = GlobalBatchRange(c, step, offset);
  const int64_t m = g.size();
  const int64_t base = m / c.world_size;
  const int64_t extra = m % c.world_size;
  const int64_t begin = g.begin + rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

int64_t MaxLocalBatchSize(const SamplerConfig& c) {
  return (c.global_batch_size + c.world_size - 1) / c.world_size;
}

bool IsLastInEpoch(const SamplerConfig& c, int64_t step, int64_t offset) {
  return step + 1 >= StepsInEpoch(c, offset);
}

Cursor Advance(const SamplerConfig& c, const Cursor& cursor) {
  if (IsLastInEpoch(c, cursor.step_in_epoch, cursor.offset)) return {cursor.epoch + 1, 0, 0};
  return {cursor.epoch, cursor.step_in_epoch + 1, cursor.offset};
}

const std::vector<int64_t>& EpochOrder::Get(const SamplerConfig& c,
                                            int64_t epoch) {
  if (!valid_ || epoch != epoch_ || c.num_samples != num_samples_ ||
      c.seed != seed_ || c.shuffle != shuffle_) {
    EpochPermutation(c.num_samples, c.seed, epoch, c.shuffle, &perm_);
    valid_ = true;
    epoch_ = epoch;
    num_samples_ = c.num_samples;
    seed_ = c.seed;
    shuffle_ = c.shuffle;
  }
  return perm_;
}

}  // namespace data
}  // namespace tandem
