// PeerLink on 3 Gloo ranks (a thread each): every rank's frame reaches its
// ring successor whole (header and payload) and is acknowledged; a frame
// the sink refuses is an error at the sender; a successor that is gone
// makes WaitSent fail (UNAVAILABLE) instead of hanging.
#include "services/worker/peer_link.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/comm/testing/gloo_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

// Keeps the last frame; refuses frames whose header starts with 'X'.
class Keep : public PeerSink {
 public:
  char* Begin(const PeerFrameHeader& header, uint64_t bytes) override {
    if (header[0] == 'X') return nullptr;
    absl::MutexLock lock(&mu_);
    header_ = header;
    data_.resize(bytes);
    return data_.data();
  }
  void Complete(bool ok) override {
    absl::MutexLock lock(&mu_);
    complete_ += ok ? 1 : 0;
  }
  absl::Mutex mu_;
  PeerFrameHeader header_ ABSL_GUARDED_BY(mu_) = {};
  std::vector<char> data_ ABSL_GUARDED_BY(mu_);
  int complete_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(PeerLink, EachRanksFrameReachesTheNextRank) {
  constexpr int kWorld = 3;
  std::vector<Keep> sinks(kWorld);
  std::vector<std::vector<char>> payloads(kWorld);
  auto results = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& c) -> absl::Status {
    absl::StatusOr<std::unique_ptr<PeerLink>> link = PeerLink::Start(c, {}, &sinks[rank]);
    if (!link.ok()) return link.status();
    // 1 MiB + 3 bytes: several socket writes, not a multiple of anything.
    payloads[rank].resize((1 << 20) + 3);
    for (size_t i = 0; i < payloads[rank].size(); ++i) payloads[rank][i] = char(i * 7 + rank);
    PeerFrameHeader h = {};
    h[0] = char('a' + rank);
    (*link)->Send(h, payloads[rank].data(), payloads[rank].size());
    absl::Status sent = (*link)->WaitSent();
    if (!sent.ok()) return sent;
    // A refused frame: the sender learns it was not held.
    h[0] = 'X';
    (*link)->Send(h, payloads[rank].data(), 16);
    absl::Status refused = (*link)->WaitSent();
    if (refused.ok()) return absl::InternalError("a refused frame counted as sent");
    // Everyone's frames are in before any link closes.
    return c.Barrier();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < kWorld; ++r) {
    const int from = (r + kWorld - 1) % kWorld;
    absl::MutexLock lock(&sinks[r].mu_);
    EXPECT_EQ(sinks[r].header_[0], char('a' + from)) << "rank " << r;
    EXPECT_TRUE(sinks[r].data_ == payloads[from]) << "rank " << r;
    EXPECT_EQ(sinks[r].complete_, 1);
  }
}

TEST(PeerLink, ASuccessorThatIsGoneFailsTheSend) {
  std::vector<Keep> sinks(2);
  auto results = comm_testing::RunGlooRanks(2, [&](int rank, Communicator& c) -> absl::Status {
    absl::StatusOr<std::unique_ptr<PeerLink>> link = PeerLink::Start(c, {}, &sinks[rank]);
    if (!link.ok()) return link.status();
    if (rank == 1) {
      link->reset();  // rank 1 is gone: its listener is closed
      return c.Barrier();
    }
    if (absl::Status s = c.Barrier(); !s.ok()) return s;
    std::vector<char> payload(4096, 'p');
    (*link)->Send(PeerFrameHeader{}, payload.data(), payload.size());
    absl::Status sent = (*link)->WaitSent();
    if (!absl::IsUnavailable(sent)) {
      return absl::InternalError(absl::StrCat("expected UNAVAILABLE, got ", sent.ToString()));
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace worker
}  // namespace tandem
