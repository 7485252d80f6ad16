// Gradient replication (issue 34 item 3), without gRPC: a RangeStore with
// a replica address hands every applied chunk to a forwarder that this
// test drains the way the Replicator does (ReadChunkForReplica, then the
// replica's ReplicaStore::Accept, a full read when it answers
// kNeedsState, then MarkReplicated). After N AdamW steps of two ranks,
// with a learning rate and gradient scale that change every step, the
// replica's parameters and optimizer state equal the primary's bit for
// bit — with the whole-step and the per-chunk apply, with and without
// int8 delta pulls (whose encoder reuses the sum buffer the gradient was
// swapped out of) — and so they do after a forced fall-back to a full
// transfer: a replica that restarted (a fresh store) and one that missed
// a step.
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/shardserver/range_store.h"
#include "services/shardserver/replica_store.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kLo = 5, kHi = 1005;  // 1000 elements in chunks of 300 (the last 100)
constexpr int kWorld = 2;

class Queue : public ChunkForwarder {
 public:
  void Applied(int64_t generation, int chunk, int64_t step) override {
    absl::MutexLock lock(&mu_);
    items_.emplace_back(generation, chunk, step);
  }
  std::vector<std::tuple<int64_t, int, int64_t>> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(items_);
  }

 private:
  absl::Mutex mu_;
  std::vector<std::tuple<int64_t, int, int64_t>> items_ ABSL_GUARDED_BY(mu_);
};

InitConfig Config(bool per_chunk, bool int8) {
  InitConfig c;
  c.job_id = "j";
  c.generation = 1;
  c.range = {kLo, kHi};
  c.chunk_elements = 300;
  c.world_size = kWorld;
  c.optimizer.set_name("adamw");
  c.optimizer.set_beta1(0.9);
  c.optimizer.set_beta2(0.999);
  c.optimizer.set_epsilon(1e-8);
  c.optimizer.set_weight_decay(0.01);
  c.apply_per_chunk = per_chunk;
  c.pull_int8_chunk = int8 ? 256 : 0;
  c.replica_address = "127.0.0.1:1";  // never dialled
  return c;
}

float Grad(int rank, int64_t step, int64_t i) {
  return static_cast<float>(((i * 31 + step * 17 + rank * 7) % 23) - 11) * 0.37f;
}

struct Counts {
  int gradients = 0, states = 0;
};

// Sends what the forwarder queued to `replica` (nullptr: drops it, a
// replica that missed those steps), as the Replicator does.
void Drain(RangeStore& store, Queue& q, ReplicaStore* replica, Counts* n) {
  v1::ReplicaChunk msg;
  std::string address;
  for (const auto& [gen, chunk, step] : q.Take()) {
    absl::StatusOr<int64_t> at = store.ReadChunkForReplica(gen, chunk, false, &msg, &address);
    ASSERT_TRUE(at.ok()) << at.status();
    ASSERT_EQ(*at, step);
    if (replica != nullptr) {
      const bool gradient = !msg.grad().data().empty();
      absl::StatusOr<ReplicaStore::Accepted> a = replica->Accept(msg);
      ASSERT_TRUE(a.ok()) << a.status();
      if (*a == ReplicaStore::Accepted::kNeedsState) {
        ASSERT_TRUE(gradient);
        ASSERT_TRUE(store.ReadChunkForReplica(gen, chunk, true, &msg, &address).ok());
        a = replica->Accept(msg);
        ASSERT_TRUE(a.ok()) << a.status();
        ASSERT_EQ(*a, ReplicaStore::Accepted::kHeld);
        ++n->states;
      } else {
        ++(gradient ? n->gradients : n->states);
      }
    }
    store.MarkReplicated(gen, chunk, step, &msg);
  }
}

void PushStep(RangeStore& store, const InitConfig& c, int64_t step) {
  for (const shard::Chunk& ch : shard::ShardLayout::CutRange(kLo, kHi, c.chunk_elements, 0)) {
    for (int rank = 0; rank < kWorld; ++rank) {
      PushHeader h;
      h.generation = 1;
      h.step = step;
      h.lo = ch.lo;
      h.hi = ch.hi;
      h.rank = rank;
      h.learning_rate = 0.01 / static_cast<double>(step);  // a schedule
      h.grad_scale = 1.0 / (1.0 + 0.1 * static_cast<double>(step));  // clipping, loss scale
      std::vector<float> g(ch.size());
      for (int64_t i = 0; i < ch.size(); ++i) g[i] = Grad(rank, step, ch.lo + i);
      absl::StatusOr<PushOutcome> o = store.Push(h, g.data(), g.size());
      ASSERT_TRUE(o.ok()) << o.status();
    }
  }
  ASSERT_TRUE(store.WaitForStep(1, step, absl::Now() + absl::Seconds(20)).ok());
}

// The replica's parameters and AdamW state at `step` against the primary's.
void ExpectBitEqual(RangeStore& store, const ReplicaStore& replica, int64_t step) {
  for (const char* name : {"", "exp_avg", "exp_avg_sq"}) {
    std::vector<float> want(kHi - kLo), got(kHi - kLo, -1.f);
    if (*name == 0) {
      ASSERT_TRUE(store.ReadParams(1, step, kLo, kHi, want.data()).ok());
    } else {
      ASSERT_TRUE(store.ReadState(1, step, name, kLo, kHi, want.data()).ok());
    }
    absl::Status s = replica.Read(step, name, kLo, kHi, got.data());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
        << "'" << name << "' at step " << step;
  }
  // The step before is still held (a recovery may need it).
  std::vector<float> prev(kHi - kLo);
  EXPECT_TRUE(replica.Read(step - 1, "", kLo, kHi, prev.data()).ok());
}

class ReplicaGradTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(ReplicaGradTest, TheReplicaStaysBitEqualOnGradientsAndAfterAFullTransfer) {
  const auto [per_chunk, int8] = GetParam();
  const InitConfig c = Config(per_chunk, int8);
  Queue q;
  RangeStore store(nullptr, /*apply_threads=*/1);
  store.SetForwarder(&q);
  {
    auto init = store.BeginInit(c);
    ASSERT_TRUE(init.ok()) << init.status();
    std::vector<float> p(kHi - kLo);
    for (int64_t i = 0; i < kHi - kLo; ++i) p[i] = 0.01f * static_cast<float>(i % 91) - 0.3f;
    ASSERT_TRUE((*init)->Fill(kLo, p.data(), p.size()).ok());
    ASSERT_TRUE(store.CommitInit(std::move(*init)).ok());
  }
  const int chunks = 4;
  auto replica = std::make_unique<ReplicaStore>();
  Counts n;
  Drain(store, q, replica.get(), &n);  // the initial state, in full
  EXPECT_EQ(n.states, chunks);
  for (int64_t step = 1; step <= 6; ++step) {
    PushStep(store, c, step);
    Drain(store, q, replica.get(), &n);
  }
  ExpectBitEqual(store, *replica, 6);
  EXPECT_EQ(n.gradients, 6 * chunks);  // every step after the first as a gradient
  EXPECT_EQ(n.states, chunks);

  // The replica restarts: its first gradient finds no step before, so each
  // chunk goes once in full, then gradients again.
  replica = std::make_unique<ReplicaStore>();
  n = {};
  for (int64_t step = 7; step <= 9; ++step) {
    PushStep(store, c, step);
    Drain(store, q, replica.get(), &n);
  }
  EXPECT_EQ(n.states, chunks);
  EXPECT_EQ(n.gradients, 2 * chunks);
  ExpectBitEqual(store, *replica, 9);

  // Step 10 never reaches the replica (lost): step 11's gradient cannot be
  // applied to 9, the full state of 11 goes instead.
  PushStep(store, c, 10);
  Drain(store, q, nullptr, &n);
  n = {};
  for (int64_t step = 11; step <= 12; ++step) {
    PushStep(store, c, step);
    Drain(store, q, replica.get(), &n);
  }
  EXPECT_EQ(n.states, chunks);
  EXPECT_EQ(n.gradients, chunks);
  ExpectBitEqual(store, *replica, 12);
}

INSTANTIATE_TEST_SUITE_P(Apply, ReplicaGradTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<bool, bool>>& p) {
                           return std::string(std::get<0>(p.param) ? "PerChunk" : "WholeStep") +
                                  (std::get<1>(p.param) ? "Int8Pulls" : "Fp32Pulls");
                         });

}  // namespace
}  // namespace shardserver
}  // namespace tandem
