// PeerReplica's receiving side (the PeerSink its link fills): a copy counts
// as held only once it arrived whole, a frame that is not a shard of this
// model is refused, and DropAfter / Clear forget what a restore made
// stale. (Snapshots and the restore run through the worker in
// peer_recovery_test.)
#include "services/worker/peer_replica.h"

#include <cstring>
#include <memory>

#include "common/kernels/cpu_backend.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

class PeerReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nn::ModelOptions mo;
    mo.max_batch = 4;
    model_ = std::move(nn::CreateModel("mlp:8,4,2", &backend_, mo)).value();
    replica_ = std::make_unique<PeerReplica>(PeerReplicaOptions{}, &backend_, model_.get());
  }
  // Delivers a frame of `floats` values for [lo, hi) at `step`; `whole`:
  // it arrived complete. Returns whether the sink took it.
  bool Deliver(int64_t lo, int64_t hi, int64_t step, uint64_t floats, bool whole) {
    ReplicaMeta m{3, 1, 3, step, 0, step * 16, lo, hi};
    PeerFrameHeader h;
    std::memcpy(h.data(), &m, sizeof(m));
    char* into = replica_->Begin(h, floats * sizeof(float));
    if (into == nullptr) return false;
    for (uint64_t i = 0; i < floats; ++i) reinterpret_cast<float*>(into)[i] = float(step + i);
    replica_->Complete(whole);
    return true;
  }

  kernels::CpuBackend backend_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<PeerReplica> replica_;
};

TEST_F(PeerReplicaTest, ACopyIsHeldOnlyOnceWhole) {
  const int64_t n = model_->storage().size();  // 8*4+4+4*2+2 = 46
  ASSERT_TRUE(Deliver(10, 20, 5, 20, true));   // params + 1 optimizer buffer
  EXPECT_EQ(replica_->held().meta.step, 5);
  EXPECT_EQ(replica_->held().meta.rank, 1);
  EXPECT_EQ(replica_->held().data.size(), 20u);
  EXPECT_EQ(replica_->held().data[3], 8.f);
  // Step 10's copy breaks off: step 5's stays the one held.
  ASSERT_TRUE(Deliver(10, 20, 10, 20, false));
  EXPECT_EQ(replica_->held().meta.step, 5);
  EXPECT_EQ(replica_->held().data[3], 8.f);
  ASSERT_TRUE(Deliver(10, 20, 15, 20, true));
  EXPECT_EQ(replica_->held().meta.step, 15);
  EXPECT_GE(replica_->bytes(), int64_t{2 * 20 * sizeof(float)});
  // Not a shard of this model: a range past its end, a size that is not
  // a whole number of buffers over the range.
  EXPECT_FALSE(Deliver(40, n + 1, 20, n + 1 - 40, true));
  EXPECT_FALSE(Deliver(10, 20, 20, 15, true));
  EXPECT_EQ(replica_->held().meta.step, 15);
}

TEST_F(PeerReplicaTest, DropAfterAndClearForgetStaleCopies) {
  ASSERT_TRUE(Deliver(0, 10, 10, 20, true));
  replica_->DropAfter(10);
  EXPECT_TRUE(replica_->held().valid());
  replica_->DropAfter(5);
  EXPECT_FALSE(replica_->held().valid());
  ASSERT_TRUE(Deliver(0, 10, 10, 20, true));
  replica_->Clear();
  EXPECT_FALSE(replica_->held().valid());
  EXPECT_FALSE(replica_->own(0).valid());
  EXPECT_FALSE(replica_->own(1).valid());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
