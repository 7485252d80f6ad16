// ShmCommunicator's piece collectives (declared in shm_communicator.h):
// ZeRO's reduce-scatter and allgather over the owners' contiguous pieces of
// the flat vector, without packing the pieces into equal blocks first. They
// keep the segment discipline of shm_communicator.cc: the first write is to
// this rank's own slot, the result area is written only after a barrier,
// and a phase that reads other ranks' slots ends with a barrier.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/comm/shm/reduce_slots.h"
#include "common/comm/shm/shm_communicator.h"

namespace tandem {
namespace {

// The largest piece, or -1 when the bounds decrease.
int64_t LargestPiece(const int64_t* bounds, int world) {
  int64_t largest = 0;
  for (int j = 0; j < world; ++j) {
    if (bounds[j + 1] < bounds[j] || bounds[j] < 0) return -1;
    largest = std::max(largest, bounds[j + 1] - bounds[j]);
  }
  return largest;
}

// Floats of piece [lo, hi) in the round starting at `off` of `round` floats.
int64_t InRound(const int64_t* bounds, int j, int64_t off, int64_t round) {
  return std::clamp<int64_t>(bounds[j + 1] - bounds[j] - off, 0, round);
}

absl::Status BadBounds(absl::string_view op, int rank) {
  return absl::InvalidArgumentError(absl::StrCat(
      "shm ", op, " on rank ", rank,
      ": piece bounds must be world_size + 1 non-decreasing offsets >= 0"));
}

}  // namespace

absl::Status ShmCommunicator::ReduceScatterPieces(const float* data, const int64_t* bounds,
                                                  float* output) {
  constexpr absl::string_view kOp = "reduce-scatter of pieces";
  if (absl::Status s = CheckUsable(kOp); !s.ok()) return s;
  const int64_t largest = LargestPiece(bounds, world_size_);
  if (largest < 0) return BadBounds(kOp, rank_);
  const float* own = data + bounds[rank_];
  const int64_t own_size = bounds[rank_ + 1] - bounds[rank_];
  if (world_size_ == 1) {
    std::memmove(output, own, own_size * sizeof(float));
    return absl::OkStatus();
  }
  if (largest == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout_;
  // Block j of a slot: that rank's copy of this round's part of rank j's
  // piece (its own block stays unused: the reducer reads its own piece
  // from `data`). Rounds of `round` floats of every piece.
  int64_t round = chunk_bytes_ / static_cast<int64_t>(sizeof(float)) / world_size_;
  if (round >= 16) round = round / 16 * 16;
  float* mine = reinterpret_cast<float*>(slot(rank_));
  // The sum goes through this rank's block of the result area when
  // `output` overlaps the own piece (ReduceSlots' dst must not alias).
  const bool aliased = output < own + own_size && own < output + own_size;
  for (int64_t off = 0; off < largest; off += round) {
    for (int j = 0; j < world_size_; ++j) {
      const int64_t n = InRound(bounds, j, off, round);
      if (j != rank_ && n > 0) std::memcpy(mine + j * round, data + bounds[j] + off, n * sizeof(float));
    }
    if (absl::Status s = WaitAll(deadline, kOp); !s.ok()) return s;
    if (const int64_t n = InRound(bounds, rank_, off, round); n > 0) {
      for (int r = 0; r < world_size_; ++r) {
        srcs_[r] = r == rank_ ? own + off : reinterpret_cast<const float*>(slot(r)) + rank_ * round;
      }
      if (aliased) {
        float* dst = reinterpret_cast<float*>(result()) + rank_ * round;
        shm_internal::ReduceSlots<shm_internal::Sum>(dst, srcs_.data(), world_size_, n,
                                                     output + off);
      } else {
        shm_internal::ReduceSlots<shm_internal::Sum>(output + off, srcs_.data(), world_size_, n);
      }
    }
    if (absl::Status s = WaitAll(deadline, kOp); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::AllGatherPieces(float* data, const int64_t* bounds) {
  constexpr absl::string_view kOp = "allgather of pieces";
  if (absl::Status s = CheckUsable(kOp); !s.ok()) return s;
  const int64_t largest = LargestPiece(bounds, world_size_);
  if (largest < 0) return BadBounds(kOp, rank_);
  if (world_size_ == 1 || largest == 0) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout_;
  const int64_t round = chunk_bytes_ / static_cast<int64_t>(sizeof(float));
  for (int64_t off = 0; off < largest; off += round) {
    if (const int64_t n = InRound(bounds, rank_, off, round); n > 0) {
      std::memcpy(slot(rank_), data + bounds[rank_] + off, n * sizeof(float));
    }
    if (absl::Status s = WaitAll(deadline, kOp); !s.ok()) return s;
    for (int j = 0; j < world_size_; ++j) {
      const int64_t n = InRound(bounds, j, off, round);
      if (j != rank_ && n > 0) std::memcpy(data + bounds[j] + off, slot(j), n * sizeof(float));
    }
    if (absl::Status s = WaitAll(deadline, kOp); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tandem
