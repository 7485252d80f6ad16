// NodeShares, a thread per local rank over Gloo: reduce-to-share leaves
// each rank the node's sum of its share (buckets of 0, 1, below L, not a
// multiple of L, a multiple of L; explicit pieces of unequal and empty
// sizes), gather-from-share puts every rank's share back where its piece
// was; a layout larger than the staging is refused before any collective.
#include "common/sync/allreduce/node_shares.h"

#include <vector>

#include "common/comm/testing/gloo_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using comm_testing::ExactValue;
using comm_testing::RunGlooRanks;

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r];
  }
}

// The sum over `local` ranks of ExactValue at i.
float NodeSum(int local, int64_t i) {
  float s = 0;
  for (int r = 0; r < local; ++r) s += ExactValue(r, i);
  return s;
}

TEST(NodeShares, BucketReduceThenGatherIsTheNodeSum) {
  for (int L : {2, 3}) {
    for (int64_t n : {0, 1, 2, 5, 6, 1001}) {
      SCOPED_TRACE(testing::Message() << "L=" << L << " n=" << n);
      ExpectAllOk(RunGlooRanks(L, [&](int rank, Communicator& c) -> absl::Status {
        NodeShares shares(&c, (1001 + L - 1) / L);
        std::vector<float> data(n);
        for (int64_t i = 0; i < n; ++i) data[i] = ExactValue(rank, i);
        if (absl::Status s = shares.ReduceBucket(data.data(), n); !s.ok()) return s;
        const int64_t share = shares.ShareCount(n);
        for (int64_t j = 0; j < share; ++j) {
          const int64_t i = rank * share + j;
          if (i >= n) break;
          EXPECT_EQ(shares.share()[j], NodeSum(L, i)) << "rank " << rank << " at " << i;
        }
        if (absl::Status s = shares.GatherBucket(data.data(), n); !s.ok()) return s;
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(data[i], NodeSum(L, i)) << "rank " << rank;
        return absl::OkStatus();
      }));
    }
  }
}

TEST(NodeShares, PiecesOfUnequalSizesAndEmptyOnes) {
  // Three local ranks; pieces of 4, 1 and 0 floats at scattered offsets.
  const std::vector<NodeShares::Piece> pieces = {{10, 4}, {2, 1}, {0, 0}};
  const int64_t block = 4;
  ExpectAllOk(RunGlooRanks(3, [&](int rank, Communicator& c) -> absl::Status {
    NodeShares shares(&c, block);
    std::vector<float> grads(16), params(16, -1.f);
    for (int64_t i = 0; i < 16; ++i) grads[i] = ExactValue(rank, i);
    if (absl::Status s = shares.ReducePieces(grads.data(), pieces, block); !s.ok()) return s;
    const NodeShares::Piece& mine = pieces[rank];
    for (int64_t j = 0; j < block; ++j) {
      EXPECT_EQ(shares.share()[j], j < mine.n ? NodeSum(3, mine.lo + j) : 0.f)
          << "rank " << rank << " at " << j;
    }
    // Each rank's own piece of params comes from elsewhere (a pull): 100 + i.
    for (int64_t j = 0; j < mine.n; ++j) {
      params[mine.lo + j] = shares.share()[j] = 100.f + (mine.lo + j);
    }
    if (absl::Status s = shares.GatherPieces(params.data(), pieces, block); !s.ok()) return s;
    for (const NodeShares::Piece& p : pieces) {
      for (int64_t j = 0; j < p.n; ++j) EXPECT_EQ(params[p.lo + j], 100.f + (p.lo + j));
    }
    EXPECT_EQ(params[0 + 1], -1.f) << "outside every piece: untouched";
    return absl::OkStatus();
  }));
}

TEST(NodeShares, RefusesALayoutLargerThanItsStaging) {
  ExpectAllOk(RunGlooRanks(2, [&](int rank, Communicator& c) -> absl::Status {
    NodeShares shares(&c, 3);  // buckets of up to 6 floats
    std::vector<float> data(8, 1.f);
    absl::Status s = shares.ReduceBucket(data.data(), 7);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find("bucket of 7 floats"), absl::string_view::npos) << s;
    const std::vector<NodeShares::Piece> pieces = {{0, 4}, {4, 4}};
    EXPECT_TRUE(absl::IsInvalidArgument(shares.ReducePieces(data.data(), pieces, 4)));
    EXPECT_TRUE(absl::IsInvalidArgument(shares.GatherPieces(data.data(), {{0, 1}}, 1)))
        << "one piece for two local ranks";
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace sync
}  // namespace tandem
