#include "common/comm/peer_exited.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(PeerExited, RoundTripsThroughTheLayersThatWrapIt) {
  EXPECT_EQ(PeerExitedText(2, 4711), "rank 2 (pid 4711) exited");
  for (int rank : {0, 1, 17, 1023}) {
    const std::string wrapped =
        absl::StrCat("allreduce bucket 3: shm allreduce on rank 0: ", PeerExitedText(rank, 99),
                     " (generation 4)");
    EXPECT_EQ(ExitedPeerRank(wrapped), rank) << wrapped;
  }
}

TEST(PeerExited, OtherFailuresNameNoExitedRank) {
  EXPECT_EQ(ExitedPeerRank(""), -1);
  EXPECT_EQ(ExitedPeerRank("shm allreduce on rank 1: the other ranks did not arrive within 60s"),
            -1);
  EXPECT_EQ(ExitedPeerRank("shm barrier on rank 1: rank 0 aborted the group"), -1);
  EXPECT_EQ(ExitedPeerRank("gloo allreduce on rank 2: Connection reset by peer"), -1);
  EXPECT_EQ(ExitedPeerRank("rank x (pid 3) exited"), -1);
  EXPECT_EQ(ExitedPeerRank("rank 3 (pid ) exited"), -1);
  EXPECT_EQ(ExitedPeerRank("rank 3 (pid 12) exit"), -1);
  // The first well-formed mention counts.
  EXPECT_EQ(ExitedPeerRank("on rank 1: rank 4 (pid 12) exited"), 4);
}

}  // namespace
}  // namespace tandem
