// ShmCommunicator's piece collectives (ReduceScatterPieces, AllGatherPieces):
// one thread per rank over an in-memory store, world sizes 1..5, pieces of
// unequal sizes (empty ones, the last short, several rounds of a small
// chunk), the sums bit for bit equal to AllReduce's, in place and not, and
// bad bounds refused with a message.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/comm/testing/rank_threads.h"
#include "gloo/rendezvous/store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

constexpr int64_t kSmallChunk = 64 << 10;  // 16384 floats: pieces span rounds

std::vector<absl::Status> RunShm(int world,
                                 const std::function<absl::Status(int, ShmCommunicator&)>& body) {
  return comm_testing::RunRanks(
      world,
      [&](int rank, gloo::rendezvous::Store& store)
          -> absl::StatusOr<std::unique_ptr<Communicator>> {
        ShmOptions o;
        o.rank = rank;
        o.world_size = world;
        o.store = &store;
        o.prefix = "test/pieces";
        o.chunk_bytes = kSmallChunk;
        absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o);
        if (!c.ok()) return c.status();
        return std::unique_ptr<Communicator>(std::move(*c));
      },
      [&](int rank, Communicator& c) { return body(rank, static_cast<ShmCommunicator&>(c)); });
}

// Not exact in fp32 sums: order matters, so equality with AllReduce checks
// the rank order too.
float Value(int rank, int64_t i) { return std::sin(0.37f * i + rank) * (1.f + 0.1f * rank); }

// ZeRO's bounds: shards of ceil(n / world), clamped to [lo, hi).
std::vector<int64_t> Bounds(int world, int64_t n, int64_t lo, int64_t hi) {
  const int64_t s = (n + world - 1) / world;
  std::vector<int64_t> b(world + 1);
  for (int j = 0; j <= world; ++j) b[j] = std::clamp<int64_t>(j * s, lo, hi);
  b[world] = hi;
  return b;
}

absl::Status Mismatch(int rank, int64_t i, float got, float want) {
  return absl::InternalError(absl::StrCat("rank ", rank, " element ", i, ": ", got, " != ", want));
}

// (world, n, lo, hi, in_place)
class PiecesSweep
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t, int64_t, bool>> {};

TEST_P(PiecesSweep, ReduceScatterEqualsAllReduceBitForBit) {
  const auto [world, n, lo, hi, in_place] = GetParam();
  const std::vector<int64_t> bounds = Bounds(world, n, lo, hi);
  auto results = RunShm(world, [&, n = n, in_place = in_place](int rank, ShmCommunicator& c) {
    std::vector<float> data(n), reduced(n);
    for (int64_t i = 0; i < n; ++i) reduced[i] = data[i] = Value(rank, i);
    if (absl::Status s = c.AllReduce(reduced.data(), n); !s.ok()) return s;
    const int64_t plo = bounds[rank], size = bounds[rank + 1] - plo;
    std::vector<float> separate(size, -1.f);
    float* out = in_place ? data.data() + plo : separate.data();
    if (absl::Status s = c.ReduceScatterPieces(data.data(), bounds.data(), out); !s.ok()) return s;
    for (int64_t i = 0; i < size; ++i) {
      if (out[i] != reduced[plo + i]) return Mismatch(rank, plo + i, out[i], reduced[plo + i]);
    }
    // The input outside this rank's piece is untouched.
    for (int64_t i = 0; i < n; ++i) {
      if ((i < plo || i >= plo + size) && data[i] != Value(rank, i)) {
        return Mismatch(rank, i, data[i], Value(rank, i));
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

TEST_P(PiecesSweep, AllGatherCopiesEveryPieceInPlace) {
  const auto [world, n, lo, hi, in_place] = GetParam();
  (void)in_place;
  const std::vector<int64_t> bounds = Bounds(world, n, lo, hi);
  auto results = RunShm(world, [&, n = n, lo = lo, hi = hi](int rank, ShmCommunicator& c) {
    // Each rank's own piece holds its values, the rest garbage.
    std::vector<float> data(n, -7.f);
    for (int64_t i = bounds[rank]; i < bounds[rank + 1]; ++i) data[i] = Value(rank, i);
    // Twice: consecutive calls share the segment without an extra barrier.
    for (int round = 0; round < 2; ++round) {
      if (absl::Status s = c.AllGatherPieces(data.data(), bounds.data()); !s.ok()) return s;
    }
    for (int64_t i = 0; i < n; ++i) {
      int owner = -1;
      for (int j = 0; j < c.world_size(); ++j) {
        if (i >= bounds[j] && i < bounds[j + 1]) owner = j;
      }
      const float want = i >= lo && i < hi ? Value(owner, i) : -7.f;
      if (data[i] != want) return Mismatch(rank, i, data[i], want);
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PiecesSweep,
    ::testing::Values(std::make_tuple(1, 1000, 0, 1000, false),
                      std::make_tuple(2, 0, 0, 0, false),
                      std::make_tuple(2, 1, 0, 1, true),         // one rank's piece empty
                      std::make_tuple(3, 1000, 0, 1000, false),  // one round, last short
                      std::make_tuple(3, 1000, 0, 1000, true),
                      std::make_tuple(4, 70001, 0, 70001, false),  // several rounds
                      std::make_tuple(4, 70001, 0, 70001, true),
                      std::make_tuple(4, 70001, 30000, 41000, false),  // a bucket in 2 shards
                      std::make_tuple(5, 100003, 12, 99999, true),
                      std::make_tuple(5, 10, 0, 10, false)));  // padding: last pieces empty

TEST(ShmPieces, DecreasingBoundsAreRefused) {
  auto results = RunShm(2, [](int, ShmCommunicator& c) {
    std::vector<float> data(10, 1.f), out(10);
    const std::vector<int64_t> bounds = {0, 6, 4};
    absl::Status rs = c.ReduceScatterPieces(data.data(), bounds.data(), out.data());
    absl::Status ag = c.AllGatherPieces(data.data(), bounds.data());
    if (rs.code() != absl::StatusCode::kInvalidArgument ||
        ag.code() != absl::StatusCode::kInvalidArgument ||
        rs.message().find("non-decreasing") == absl::string_view::npos) {
      return absl::InternalError(absl::StrCat("want InvalidArgument, got ", rs.ToString(), " / ",
                                              ag.ToString()));
    }
    // The refusal is local: the communicator still works.
    return c.AllReduce(data.data(), 10);
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace tandem
