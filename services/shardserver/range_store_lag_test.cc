// RangeStore with range replication (InitConfig::replica_address), behind a
// fake ChunkForwarder that acknowledges only when the test says so: pulls
// never wait for the replica; a chunk applies step S + 1 only once its
// step S is acknowledged (the replica lags by one step at most), and a push
// of S + 1 is acknowledged once every chunk's S is (WaitReplicated); every
// applied chunk is handed to the forwarder before its pull is answered;
// the copies from before the last two steps serve recovery reads; what the
// replica is sent (the initial state, then each step's summed gradient); a
// new generation or the store's end releases a step waiting for its replica.
#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kLo = 0, kHi = 10;  // chunks [0,4) [4,7) [7,10)
constexpr int kChunks = 3;
constexpr float kLr = 0.5f;

// Records (generation, chunk, step) as the store hands chunks over.
class RecordingForwarder : public ChunkForwarder {
 public:
  void Applied(int64_t generation, int chunk, int64_t step) override {
    absl::MutexLock lock(&mu_);
    seen_.emplace_back(generation, chunk, step);
  }
  bool Saw(int64_t generation, int chunk, int64_t step) const {
    absl::MutexLock lock(&mu_);
    return std::find(seen_.begin(), seen_.end(), std::make_tuple(generation, chunk, step)) !=
           seen_.end();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::tuple<int64_t, int, int64_t>> seen_ ABSL_GUARDED_BY(mu_);
};

InitConfig Config(int64_t generation, bool per_chunk) {
  InitConfig c;
  c.job_id = "j";
  c.generation = generation;
  c.range = {kLo, kHi};
  c.chunk_elements = 4;
  c.world_size = 1;
  c.optimizer.set_name("sgd");
  c.optimizer.set_momentum(0.5);
  c.apply_per_chunk = per_chunk;
  c.replica_address = "127.0.0.1:1";  // never dialled: the forwarder is a fake
  return c;
}

void Init(RangeStore& store, const InitConfig& c) {
  auto init = store.BeginInit(c);
  ASSERT_TRUE(init.ok()) << init.status();
  std::vector<float> p(kHi - kLo, 1.f);
  ASSERT_TRUE((*init)->Fill(kLo, p.data(), p.size()).ok());
  ASSERT_TRUE(store.CommitInit(std::move(*init)).ok());
}

// Pushes every chunk of `step` with gradient value step (one rank).
void PushStep(RangeStore& store, int64_t gen, int64_t step) {
  const int64_t cut[kChunks + 1] = {0, 4, 7, 10};
  for (int i = 0; i < kChunks; ++i) {
    PushHeader h;
    h.generation = gen;
    h.step = step;
    h.lo = cut[i];
    h.hi = cut[i + 1];
    h.learning_rate = kLr;
    std::vector<float> g(h.hi - h.lo, static_cast<float>(step));
    absl::StatusOr<PushOutcome> o = store.Push(h, g.data(), g.size());
    ASSERT_TRUE(o.ok()) << o.status();
  }
}

void AckAll(RangeStore& store, int64_t gen, int64_t step) {
  for (int i = 0; i < kChunks; ++i) store.MarkReplicated(gen, i, step);
}

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

// SGD, momentum 0.5, lr 0.5, gradient s at step s, from 1.
float Expected(int64_t step) {
  float p = 1.f, v = 0.f;
  for (int64_t s = 1; s <= step; ++s) {
    v = 0.5f * v + static_cast<float>(s);
    p -= kLr * v;
  }
  return p;
}

void ExpectAt(const std::vector<float>& got, int64_t step) {
  for (float x : got) EXPECT_FLOAT_EQ(x, Expected(step)) << "step " << step;
}

class LagTest : public ::testing::TestWithParam<bool> {};  // apply_per_chunk

TEST_P(LagTest, PullsDoNotWaitAndTheNextStepWaitsForTheReplica) {
  RecordingForwarder fwd;
  RangeStore store(nullptr, /*apply_threads=*/1);
  store.SetForwarder(&fwd);
  Init(store, Config(1, GetParam()));
  for (int i = 0; i < kChunks; ++i) EXPECT_TRUE(fwd.Saw(1, i, 0));  // the initial state

  // Step 1 waits for the replica to hold step 0.
  PushStep(store, 1, 1);
  EXPECT_EQ(store.WaitForStep(1, 1, absl::Now() + absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  AckAll(store, 1, 0);
  ASSERT_TRUE(store.WaitForStep(1, 1, Soon()).ok());
  // Step 1's pull is answered with its replication not acknowledged, and
  // the chunks were handed to the forwarder before it.
  for (int i = 0; i < kChunks; ++i) EXPECT_TRUE(fwd.Saw(1, i, 1)) << i;
  std::vector<float> out(kHi - kLo);
  ASSERT_TRUE(store.ReadParams(1, 1, kLo, kHi, out.data()).ok());
  ExpectAt(out, 1);

  // Step 2: pushed, not applied until step 1 is acknowledged.
  PushStep(store, 1, 2);
  EXPECT_EQ(store.WaitForStep(1, 2, absl::Now() + absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store.info().step, 1);
  AckAll(store, 1, 1);
  ASSERT_TRUE(store.WaitForStep(1, 2, Soon()).ok());
  AckAll(store, 1, 2);
  PushStep(store, 1, 3);
  ASSERT_TRUE(store.WaitForStep(1, 3, Soon()).ok());

  // The range is at 3 and keeps 1 and 2 (a survivor two steps past the
  // step a lagging replica holds); 0 is gone.
  for (int64_t step = 1; step <= 3; ++step) {
    absl::Status s = store.ReadKept(step, "", kLo, kHi, out.data());
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
    ExpectAt(out, step);
  }
  ASSERT_TRUE(store.ReadKept(1, "momentum_buffer", kLo, kHi, out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], 1.f);  // momentum after step 1: gradient 1
  absl::Status gone = store.ReadKept(0, "", kLo, kHi, out.data());
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(gone.message(), "is at step 3 (kept: 1 and 2)")) << gone;
  // Parameters and momentum, two kept versions, 10 elements, and the
  // gradient kept for the replica.
  EXPECT_EQ(store.kept_bytes(), (2 * 2 + 1) * (kHi - kLo) * 4);
}

TEST_P(LagTest, ANewGenerationReleasesAStepWaitingForItsReplica) {
  RecordingForwarder fwd;
  RangeStore store(nullptr, /*apply_threads=*/1);
  store.SetForwarder(&fwd);
  Init(store, Config(1, GetParam()));
  PushStep(store, 1, 1);  // waits for step 0's acknowledgement, which never comes
  Init(store, Config(2, GetParam()));
  EXPECT_EQ(store.WaitForStep(1, 1, Soon()).code(), absl::StatusCode::kAborted);
  // The new generation collects step 1 from its own initial state.
  AckAll(store, 2, 0);
  PushStep(store, 2, 1);
  ASSERT_TRUE(store.WaitForStep(2, 1, Soon()).ok());
  std::vector<float> out(kHi - kLo);
  ASSERT_TRUE(store.ReadParams(2, 1, kLo, kHi, out.data()).ok());
  ExpectAt(out, 1);
  PushStep(store, 2, 2);  // left waiting: the store's end must not hang on it
}

// The replicator's path: the initial step goes out in full, every applied
// step as the summed gradient it applied (lent to the message, not copied,
// and given back at the acknowledgement), and in full when asked.
TEST_P(LagTest, TheReplicaIsSentTheInitialStateThenEachStepsGradient) {
  RecordingForwarder fwd;
  RangeStore store(nullptr, /*apply_threads=*/1);
  store.SetForwarder(&fwd);
  Init(store, Config(1, GetParam()));
  v1::ReplicaChunk msg;
  std::string address;
  for (int i = 0; i < kChunks; ++i) {
    absl::StatusOr<int64_t> at = store.ReadChunkForReplica(1, i, false, &msg, &address);
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_EQ(*at, 0);
    EXPECT_EQ(address, "127.0.0.1:1");
    EXPECT_TRUE(msg.grad().data().empty());  // no gradient at the InitShard step
    ASSERT_EQ(msg.params().data().size(), (i == 0 ? 4u : 3u) * sizeof(float));
    EXPECT_EQ(msg.state_names_size(), 1);
    EXPECT_EQ(msg.optimizer().momentum(), 0.5);
    store.MarkReplicated(1, i, 0, &msg);
  }
  for (int64_t step = 1; step <= 3; ++step) {
    PushStep(store, 1, step);
    ASSERT_TRUE(store.WaitForStep(1, step, Soon()).ok());
    for (int i = 0; i < kChunks; ++i) {
      absl::StatusOr<int64_t> at = store.ReadChunkForReplica(1, i, false, &msg, &address);
      ASSERT_TRUE(at.ok()) << at.status();
      ASSERT_EQ(*at, step);
      const size_t bytes = (i == 0 ? 4u : 3u) * sizeof(float);
      ASSERT_EQ(msg.grad().data().size(), bytes);
      EXPECT_EQ(reinterpret_cast<const float*>(msg.grad().data().data())[0],
                static_cast<float>(step));
      EXPECT_EQ(msg.lr(), kLr);
      EXPECT_EQ(msg.grad_scale(), 1.f);
      EXPECT_TRUE(msg.params().data().empty());
      EXPECT_EQ(msg.state_size(), 0);
      if (step == 2 && i == 1) {
        // The replica asked for the state: the same message, read in full,
        // gives the gradient back first.
        ASSERT_TRUE(store.ReadChunkForReplica(1, i, true, &msg, &address).ok());
        EXPECT_TRUE(msg.grad().data().empty());
        ASSERT_EQ(msg.params().data().size(), bytes);
        EXPECT_FLOAT_EQ(reinterpret_cast<const float*>(msg.params().data().data())[0],
                        Expected(step));
        ASSERT_EQ(msg.state_size(), 1);
        EXPECT_EQ(msg.state_names(0), "momentum_buffer");
      }
      store.MarkReplicated(1, i, step, &msg);
      // The gradient went back to the chunk: the message holds it no more.
      EXPECT_NE(msg.grad().data().size(), bytes);
    }
  }
  // Recovery reads of the kept steps are unaffected.
  std::vector<float> out(kHi - kLo);
  for (int64_t step = 2; step <= 3; ++step) {
    ASSERT_TRUE(store.ReadKept(step, "", kLo, kHi, out.data()).ok());
    ExpectAt(out, step);
  }
  ASSERT_TRUE(store.ReadKept(2, "momentum_buffer", kLo, kHi, out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], 2.5f);  // 0.5 x 1 + 2
  // The buffers went back: step 4 still collects and applies.
  PushStep(store, 1, 4);
  ASSERT_TRUE(store.WaitForStep(1, 4, Soon()).ok());
  ASSERT_TRUE(store.ReadParams(1, 4, kLo, kHi, out.data()).ok());
  ExpectAt(out, 4);
}

// A push of step S is acknowledged (ShardService) once the replica holds
// S - 1: WaitReplicated.
TEST(LagTest, WaitReplicatedReturnsOnceEveryChunkIsAcknowledged) {
  RecordingForwarder fwd;
  RangeStore store(nullptr, /*apply_threads=*/1);
  store.SetForwarder(&fwd);
  Init(store, Config(1, /*per_chunk=*/false));
  const absl::Time now = absl::Now();
  EXPECT_EQ(store.WaitReplicated(1, 0, now).code(), absl::StatusCode::kDeadlineExceeded);
  store.MarkReplicated(1, 0, 0);
  store.MarkReplicated(1, 1, 0);
  absl::Status partial = store.WaitReplicated(1, 0, now);
  EXPECT_EQ(partial.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(partial.message(), "127.0.0.1:1")) << partial;
  store.MarkReplicated(1, 2, 0);
  EXPECT_TRUE(store.WaitReplicated(1, 0, now).ok());
  EXPECT_EQ(store.WaitReplicated(7, 0, Soon()).code(), absl::StatusCode::kAborted);
  // Without a replica there is nothing to wait for.
  InitConfig plain = Config(2, false);
  plain.replica_address.clear();
  Init(store, plain);
  EXPECT_TRUE(store.WaitReplicated(2, 5, now).ok());
}

TEST(LagTest, PerChunkApplyWaitsOnlyForItsOwnChunksReplica) {
  RecordingForwarder fwd;
  RangeStore store(nullptr, /*apply_threads=*/1);
  store.SetForwarder(&fwd);
  Init(store, Config(1, /*per_chunk=*/true));
  store.MarkReplicated(1, 0, 0);  // chunk 0 only
  PushStep(store, 1, 1);
  ASSERT_TRUE(store.WaitForStep(1, 1, Soon(), 0, 4).ok());
  EXPECT_EQ(store.WaitForStep(1, 1, absl::Now() + absl::Milliseconds(50), 4, 7).code(),
            absl::StatusCode::kDeadlineExceeded);
  AckAll(store, 1, 0);
  ASSERT_TRUE(store.WaitForStep(1, 1, Soon()).ok());
}

INSTANTIATE_TEST_SUITE_P(Apply, LagTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "PerChunk" : "WholeStep";
                         });

}  // namespace
}  // namespace shardserver
}  // namespace tandem
