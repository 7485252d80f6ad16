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
  const int64_t steps = StepsPerEpoch(c);
  if (cursor.step_in_epoch < 0 || cursor.step_in_epoch >= steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step_in_epoch ", cursor.step_in_epoch, " is outside the epoch's ",
        steps, " steps"));
  }
  return absl::OkStatus();
}

int64_t StepsPerEpoch(const SamplerConfig& c) {
  if (c.global_batch_size <= 0) return 0;
  return c.remainder == Remainder::kDrop
             ? c.num_samples / c.global_batch_size
             : (c.num_samples + c.global_batch_size - 1) / c.global_batch_size;
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

IndexRange GlobalBatchRange(const SamplerConfig& c, int64_t step) {
  const int64_t begin = step * c.global_batch_size;
  return {begin, std::min(begin + c.global_batch_size, c.num_samples)};
}

IndexRange RankSlice(const SamplerConfig& c, int64_t step, int rank) {
  const IndexRange g = GlobalBatchRange(c, step);
  const int64_t m = g.size();
  const int64_t base = m / c.world_size;
  const int64_t extra = m % c.world_size;
  const int64_t begin = g.begin + rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

int64_t MaxLocalBatchSize(const SamplerConfig& c) {
  return (c.global_batch_size + c.world_size - 1) / c.world_size;
}

bool IsLastInEpoch(const SamplerConfig& c, int64_t step) {
  return step + 1 >= StepsPerEpoch(c);
}

Cursor Advance(const SamplerConfig& c, const Cursor& cursor) {
  if (IsLastInEpoch(c, cursor.step_in_epoch)) return {cursor.epoch + 1, 0};
  return {cursor.epoch, cursor.step_in_epoch + 1};
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
