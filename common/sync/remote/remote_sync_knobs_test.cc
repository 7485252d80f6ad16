// The --sync_opt keys ps and hybrid share (shard_server_state.h): how many
// pull lanes a worker opens per shard server, and pull_streams' bounds
// refused with a message that names them, through both strategies.
#include <string>

#include "common/sync/registry.h"
#include "common/sync/remote/shard_server_state.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

int Lanes(const char* opts) {
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("hybrid", opts);
  EXPECT_TRUE(o.ok()) << o.status();
  if (!o.ok()) return -1;
  absl::StatusOr<RemoteSyncKnobs> k = ParseRemoteSyncKnobs(*o);
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? PullLanes(*k) : -1;
}

TEST(RemoteSyncKnobs, PullLanesKeepThePullBytesInFlight) {
  EXPECT_EQ(Lanes(""), 2);  // the defaults: as many as push streams
  EXPECT_EQ(Lanes("chunk_mb=0.0625"), 8);
  EXPECT_EQ(Lanes("chunk_mb=0.1"), 5);
  EXPECT_EQ(Lanes("chunk_mb=0.0625,streams=1"), 4);
  EXPECT_EQ(Lanes("chunk_mb=1,streams=3"), 3);  // never fewer than the push streams
  EXPECT_EQ(Lanes("chunk_mb=0.001"), 32);       // at most 32
  EXPECT_EQ(Lanes("chunk_mb=0.0625,pull_streams=3"), 3);  // given: as given
}

TEST(RemoteSyncKnobs, RefusesPullStreamsOutOfRange) {
  for (const char* name : {"ps", "hybrid"}) {
    for (const char* bad : {"pull_streams=-1", "pull_streams=33"}) {
      absl::StatusOr<SyncOptions> o = ParseSyncOptions(name, bad);
      ASSERT_TRUE(o.ok()) << o.status();
      const absl::Status s = ValidateSyncOptions(*o);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << " " << bad;
      EXPECT_NE(s.message().find("pull_streams must be in 0..32"), std::string::npos) << s;
    }
    absl::StatusOr<SyncOptions> ok = ParseSyncOptions(name, "pull_streams=32");
    ASSERT_TRUE(ok.ok());
    EXPECT_TRUE(ValidateSyncOptions(*ok).ok()) << name;
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
