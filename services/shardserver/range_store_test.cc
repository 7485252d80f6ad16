// RangeStore without gRPC: a step is applied once when every contribution
// is in, repeats are acknowledged and not summed, refusals leave nothing
// applied, a half-pushed step applies nothing, pulls wait with a deadline,
// a new generation aborts waiters and keeps optimizer state only when it
// continues at the same step; int8 delta pulls keep a worker's copy within
// one rounding of the master at every step (no drift), a reset pull makes
// it exact, and what does not fit is refused.
#include "services/shardserver/range_store.h"

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/codec/int8_codec.h"
#include "common/metrics/metrics.h"
#include "gtest/gtest.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kLo = 100, kHi = 110;  // the server's range: 10 floats
constexpr int64_t kChunk = 4;           // chunks [100,104) [104,107) [107,110)
constexpr float kLr = 0.5f;

v1::OptimizerConfig Sgd(double momentum = 0) {
  v1::OptimizerConfig c;
  c.set_name("sgd");
  c.set_momentum(momentum);
  return c;
}

InitConfig Config(int64_t generation, int world, int64_t step = 0,
                  v1::OptimizerConfig opt = Sgd()) {
  InitConfig c;
  c.job_id = "j";
  c.generation = generation;
  c.step = step;
  c.range = {kLo, kHi};
  c.chunk_elements = kChunk;
  c.world_size = world;
  c.optimizer = opt;
  return c;
}

// Initialises with params[i] = 1 (returns whether optimizer state was kept).
bool Init(RangeStore& store, const InitConfig& c, float value = 1.f) {
  auto init = store.BeginInit(c);
  EXPECT_TRUE(init.ok()) << init.status();
  std::vector<float> p(c.range.size(), value);
  EXPECT_TRUE((*init)->Fill(c.range.lo, p.data(), p.size()).ok());
  absl::StatusOr<bool> kept = store.CommitInit(std::move(*init));
  EXPECT_TRUE(kept.ok()) << kept.status();
  return kept.ok() && *kept;
}

PushHeader Header(int64_t gen, int64_t step, int64_t lo, int64_t hi, int rank, int weight = 1) {
  PushHeader h;
  h.generation = gen;
  h.step = step;
  h.lo = lo;
  h.hi = hi;
  h.rank = rank;
  h.weight = weight;
  h.learning_rate = kLr;
  h.grad_scale = 1;
  return h;
}

const int64_t kChunks[3][2] = {{100, 104}, {104, 107}, {107, 110}};

// Pushes every chunk of `rank` with gradient value g.
void PushAll(RangeStore& store, int64_t gen, int64_t step, int rank, float g, int weight = 1) {
  for (const auto& c : kChunks) {
    std::vector<float> data(c[1] - c[0], g);
    absl::StatusOr<PushOutcome> o =
        store.Push(Header(gen, step, c[0], c[1], rank, weight), data.data(), data.size());
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(*o, PushOutcome::kSummed);
  }
}

std::vector<float> Read(RangeStore& store, int64_t gen, int64_t step) {
  std::vector<float> out(kHi - kLo, -1.f);
  absl::Status s = store.ReadParams(gen, step, kLo, kHi, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(RangeStore, AppliesTheMeanOnceEveryRankPushed) {
  RangeStore store;
  Init(store, Config(1, 2));
  PushAll(store, 1, 1, 0, 1.f);
  // Half the contributions: not applied.
  EXPECT_EQ(store.WaitForStep(1, 1, absl::Now()).code(), absl::StatusCode::kDeadlineExceeded);
  PushAll(store, 1, 1, 1, 3.f);
  ASSERT_TRUE(store.WaitForStep(1, 1, absl::Now() + absl::Seconds(10)).ok());
  for (float p : Read(store, 1, 1)) EXPECT_FLOAT_EQ(p, 1.f - kLr * 2.f);  // mean gradient 2
  EXPECT_EQ(store.info().step, 1);
}

TEST(RangeStore, ARepeatedPushIsAcknowledgedAndNotSummedTwice) {
  auto metrics = Metrics::Create({}).value();
  ShardMetrics m = ShardMetrics::Create(metrics.get()).value();
  RangeStore store(&m);
  Init(store, Config(1, 2));
  PushAll(store, 1, 1, 0, 1.f);
  std::vector<float> g(4, 100.f);  // a retry of chunk 0 (different bytes would still be ignored)
  absl::StatusOr<PushOutcome> again = store.Push(Header(1, 1, 100, 104, 0), g.data(), g.size());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, PushOutcome::kDuplicate);
  PushAll(store, 1, 1, 1, 3.f);
  // A retry after the step was applied is acknowledged too.
  again = store.Push(Header(1, 1, 100, 104, 1), g.data(), g.size());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, PushOutcome::kDuplicate);
  for (float p : Read(store, 1, 1)) EXPECT_FLOAT_EQ(p, 1.f - kLr * 2.f);
  EXPECT_EQ(m.duplicate_pushes->Value(), 2);
  EXPECT_EQ(m.steps_applied->Value(), 1);
}

TEST(RangeStore, RefusesWhatDoesNotFitAndAppliesNothingOfIt) {
  RangeStore store;
  Init(store, Config(3, 2));
  std::vector<float> g(4, 50.f);
  struct Bad {
    PushHeader h;
    int64_t n;
    absl::StatusCode code;
  };
  PushHeader lr = Header(3, 1, 100, 104, 1);
  lr.learning_rate = 0.25;
  const std::vector<Bad> bad = {
      {Header(3, 1, 100, 104, 0), 3, absl::StatusCode::kInvalidArgument},   // wrong size
      {Header(3, 1, 101, 105, 0), 4, absl::StatusCode::kInvalidArgument},   // not a chunk
      {Header(3, 1, 100, 103, 0), 3, absl::StatusCode::kInvalidArgument},   // part of a chunk
      {Header(3, 1, 200, 204, 0), 4, absl::StatusCode::kInvalidArgument},   // outside
      {Header(3, 2, 100, 104, 0), 4, absl::StatusCode::kFailedPrecondition},  // step ahead
      {Header(2, 1, 100, 104, 0), 4, absl::StatusCode::kAborted},  // old generation
      {Header(4, 1, 100, 104, 0), 4, absl::StatusCode::kAborted},  // future generation
      {Header(3, 1, 100, 104, 2), 4, absl::StatusCode::kInvalidArgument},   // rank >= world
      {Header(3, 1, 100, 104, 0, 3), 4, absl::StatusCode::kInvalidArgument},  // weight > world
  };
  for (const Bad& b : bad) {
    absl::StatusOr<PushOutcome> o = store.Push(b.h, g.data(), b.n);
    EXPECT_EQ(o.status().code(), b.code) << "push [" << b.h.lo << "," << b.h.hi << ") step "
                                         << b.h.step << " gen " << b.h.generation;
    EXPECT_FALSE(o.status().message().empty());
  }
  // A step's pushes must agree on the learning rate.
  PushAll(store, 3, 1, 0, 1.f);
  absl::StatusOr<PushOutcome> o = store.Push(lr, g.data(), 4);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << o.status();
  // Weight 2 on top of rank 0's 1 would exceed world 2.
  o = store.Push(Header(3, 1, 100, 104, 1, 2), g.data(), 4);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << o.status();
  PushAll(store, 3, 1, 1, 3.f);
  // None of the refused 50s got in.
  for (float p : Read(store, 3, 1)) EXPECT_FLOAT_EQ(p, 1.f - kLr * 2.f);
}

TEST(RangeStore, AWorkerThatPushedPartOfAStepLeavesNothingApplied) {
  RangeStore store;
  Init(store, Config(1, 2));
  PushAll(store, 1, 1, 0, 1.f);
  std::vector<float> g(4, 3.f);
  ASSERT_TRUE(store.Push(Header(1, 1, 100, 104, 1), g.data(), 4).ok());  // then rank 1 dies
  // Chunk 0 has every contribution, but the step is not applied anywhere.
  absl::Status wait = store.WaitForStep(1, 1, absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(wait.code(), absl::StatusCode::kDeadlineExceeded) << wait;
  EXPECT_NE(wait.message().find("1 of 3 chunks"), std::string::npos) << wait;
  for (float p : Read(store, 1, 0)) EXPECT_EQ(p, 1.f);
  // The next generation (the survivors re-joined) starts clean from step 0.
  Init(store, Config(2, 1));
  PushAll(store, 2, 1, 0, 4.f);
  for (float p : Read(store, 2, 1)) EXPECT_FLOAT_EQ(p, 1.f - kLr * 4.f);
}

TEST(RangeStore, APullWaitsUntilTheStepIsApplied) {
  RangeStore store;
  Init(store, Config(1, 2));
  absl::Status waited;
  std::thread waiter([&] { waited = store.WaitForStep(1, 1, absl::Now() + absl::Seconds(30)); });
  PushAll(store, 1, 1, 0, 1.f);
  PushAll(store, 1, 1, 1, 1.f);
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited;
  // A pull of a replaced step says so; a pull of the next waits.
  EXPECT_EQ(store.WaitForStep(1, 0, absl::Now()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.WaitForStep(1, 2, absl::Now()).code(), absl::StatusCode::kDeadlineExceeded);
  std::vector<float> out(10);
  EXPECT_EQ(store.ReadParams(1, 0, kLo, kHi, out.data()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.ReadParams(1, 1, kLo, kHi + 1, out.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RangeStore, ANewGenerationAbortsWaitersOfTheOld) {
  RangeStore store;
  Init(store, Config(1, 2));
  absl::Status waited;
  std::thread waiter([&] { waited = store.WaitForStep(1, 1, absl::InfiniteFuture()); });
  // The waiter may not be waiting yet; either way it must end ABORTED or
  // see the generation as over, never hang.
  Init(store, Config(2, 2));
  waiter.join();
  EXPECT_TRUE(waited.code() == absl::StatusCode::kAborted ||
              waited.code() == absl::StatusCode::kFailedPrecondition)
      << waited;
  auto init = store.BeginInit(Config(1, 2));
  ASSERT_TRUE(init.ok());
  std::vector<float> p(10, 0.f);
  ASSERT_TRUE((*init)->Fill(kLo, p.data(), 10).ok());
  EXPECT_EQ(store.CommitInit(std::move(*init)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RangeStore, HybridWeightsCompleteAChunk) {
  RangeStore store;
  Init(store, Config(1, 3));
  PushAll(store, 1, 1, 0, 2.f, /*weight=*/2);  // a node of 2 ranks, summed
  EXPECT_EQ(store.WaitForStep(1, 1, absl::Now()).code(), absl::StatusCode::kDeadlineExceeded);
  PushAll(store, 1, 1, 2, 1.f, /*weight=*/1);
  for (float p : Read(store, 1, 1)) EXPECT_FLOAT_EQ(p, 1.f - kLr * 1.f);  // (2 + 1) / 3
}

TEST(RangeStore, OptimizerStateIsKeptOnlyWhenContinuingAtTheSameStep) {
  RangeStore store;
  EXPECT_FALSE(Init(store, Config(1, 1, 0, Sgd(0.9))));
  PushAll(store, 1, 1, 0, 1.f);
  const std::vector<float> after1 = Read(store, 1, 1);
  // Same step, same layout: momentum kept.
  EXPECT_TRUE(Init(store, Config(2, 1, 1, Sgd(0.9)), after1[0]));
  PushAll(store, 2, 2, 0, 1.f);
  const float kept = Read(store, 2, 2)[0];
  EXPECT_FLOAT_EQ(kept, after1[0] - kLr * (0.9f * 1.f + 1.f));
  // Rolled back to step 1 (a restore): momentum from zeros.
  EXPECT_FALSE(Init(store, Config(3, 1, 1, Sgd(0.9)), after1[0]));
  PushAll(store, 3, 2, 0, 1.f);
  EXPECT_FLOAT_EQ(Read(store, 3, 2)[0], after1[0] - kLr * 1.f);
}

TEST(RangeStore, InitMustCoverTheRange) {
  RangeStore store;
  auto init = store.BeginInit(Config(1, 1));
  ASSERT_TRUE(init.ok());
  std::vector<float> p(5, 1.f);
  ASSERT_TRUE((*init)->Fill(kLo, p.data(), 5).ok());
  EXPECT_EQ((*init)->Fill(kHi - 2, p.data(), 5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.CommitInit(std::move(*init)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.info().generation, 0);
  InitConfig bad = Config(1, 1);
  bad.optimizer.set_name("lamb");
  EXPECT_EQ(store.BeginInit(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = Config(0, 1);
  EXPECT_EQ(store.BeginInit(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RangeStore, OptimizerStateSentWithInitIsUsedAndReadBack) {
  RangeStore store;
  InitConfig c = Config(1, 1, 4, Sgd(0.9));
  auto init = store.BeginInit(c);
  ASSERT_TRUE(init.ok());
  std::vector<float> p(10, 1.f), m(10);
  for (int i = 0; i < 10; ++i) m[i] = 0.1f * i;
  ASSERT_TRUE((*init)->Fill(kLo, p.data(), 10).ok());
  // In two pieces that cross a chunk boundary.
  ASSERT_TRUE((*init)->FillState("momentum_buffer", kLo, m.data(), 5).ok());
  ASSERT_TRUE((*init)->FillState("momentum_buffer", kLo + 5, m.data() + 5, 5).ok());
  EXPECT_EQ((*init)->FillState("exp_avg", kLo, m.data(), 10).code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<bool> kept = store.CommitInit(std::move(*init));
  ASSERT_TRUE(kept.ok()) << kept.status();
  std::vector<float> out(10, -1.f);
  ASSERT_TRUE(store.ReadState(1, 4, "momentum_buffer", kLo, kHi, out.data()).ok());
  EXPECT_EQ(out, m);
  PushAll(store, 1, 5, 0, 1.f);
  const std::vector<float> after = Read(store, 1, 5);
  for (int i = 0; i < 10; ++i) EXPECT_FLOAT_EQ(after[i], 1.f - kLr * (0.9f * m[i] + 1.f)) << i;
  ASSERT_TRUE(store.ReadState(1, 5, "momentum_buffer", kLo + 2, kLo + 6, out.data()).ok());
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], 0.9f * m[2 + i] + 1.f);
  EXPECT_EQ(store.ReadState(1, 4, "momentum_buffer", kLo, kHi, out.data()).code(),
            absl::StatusCode::kFailedPrecondition);
  // Half a buffer is refused at commit.
  init = store.BeginInit(Config(2, 1, 5, Sgd(0.9)));
  ASSERT_TRUE(init.ok());
  ASSERT_TRUE((*init)->Fill(kLo, p.data(), 10).ok());
  ASSERT_TRUE((*init)->FillState("momentum_buffer", kLo, m.data(), 5).ok());
  EXPECT_EQ(store.CommitInit(std::move(*init)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.info().generation, 1);
}

TEST(RangeStore, PerChunkApplyServesAChunkOnceItIsComplete) {
  RangeStore store;
  InitConfig c = Config(1, 2, 0, Sgd(0.9));
  c.apply_per_chunk = true;
  Init(store, c);
  // Both ranks push chunk [100, 104) only: it is applied and pullable, the
  // rest of the step is not.
  std::vector<float> g(4, 2.f);
  ASSERT_TRUE(store.Push(Header(1, 1, 100, 104, 0), g.data(), 4).ok());
  ASSERT_TRUE(store.Push(Header(1, 1, 100, 104, 1), g.data(), 4).ok());
  ASSERT_TRUE(store.WaitForStep(1, 1, absl::Now() + absl::Seconds(10), 100, 104).ok());
  std::vector<float> out(4);
  ASSERT_TRUE(store.ReadParams(1, 1, 100, 104, out.data()).ok());
  for (float p : out) EXPECT_FLOAT_EQ(p, 1.f - kLr * 2.f);
  EXPECT_EQ(store.WaitForStep(1, 1, absl::Now(), 104, 110).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(store.ReadParams(1, 1, 104, 107, out.data()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.info().step, 0);  // the step as a whole is not applied
  // A re-init at step 0 must not keep the partly stepped momentum.
  c.generation = 2;
  EXPECT_FALSE(Init(store, c));
  // Completing a step applies every chunk; info() moves on.
  PushAll(store, 2, 1, 0, 1.f);
  PushAll(store, 2, 1, 1, 3.f);
  ASSERT_TRUE(store.WaitForStep(2, 1, absl::Now() + absl::Seconds(10), kLo, kHi).ok());
  EXPECT_EQ(store.info().step, 1);
  for (float p : Read(store, 2, 1)) EXPECT_FLOAT_EQ(p, 1.f - kLr * 2.f);
}

// A worker's side of int8 delta pulls: adds each chunk's decoded delta of
// `step` to w (the values it holds, over [kLo, kHi)); returns the largest
// scale of the blocks (a rounding is at most half of it).
float ApplyDeltas(RangeStore& store, const codec::Codec& codec, int64_t gen, int64_t step,
                  std::vector<float>& w) {
  float largest = 0;
  for (const auto& c : kChunks) {
    std::string block;
    absl::Status s = store.ReadDelta(gen, step, c[0], c[1], &block);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) continue;
    EXPECT_EQ(static_cast<int64_t>(block.size()), codec.MaxEncodedBytes(c[1] - c[0]));
    float scale;  // one scale per chunk here: chunks are < 256 values
    std::memcpy(&scale, block.data(), sizeof(scale));
    largest = std::max(largest, scale);
    codec.DecodeAdd(reinterpret_cast<const uint8_t*>(block.data()), c[1] - c[0],
                    w.data() + (c[0] - kLo));
  }
  return largest;
}

TEST(RangeStore, Int8DeltaPullsTrackTheMasterWithinOneRounding) {
  const std::unique_ptr<codec::Codec> codec = codec::MakeInt8Codec({.chunk = 256});
  for (bool per_chunk : {false, true}) {
    SCOPED_TRACE(per_chunk ? "apply per chunk" : "apply per step");
    RangeStore store;
    InitConfig c = Config(1, 1, 0, Sgd(0.9));
    c.apply_per_chunk = per_chunk;
    c.pull_int8_chunk = 256;
    Init(store, c);
    std::vector<float> w(kHi - kLo, 1.f);  // what the worker holds
    double largest_error = 0;
    for (int64_t step = 1; step <= 40; ++step) {
      for (const auto& ch : kChunks) {
        std::vector<float> g(ch[1] - ch[0]);
        for (size_t i = 0; i < g.size(); ++i) {
          g[i] = std::sin(0.7f * static_cast<float>(step) + 1.3f * static_cast<float>(ch[0] + i));
        }
        ASSERT_TRUE(store.Push(Header(1, step, ch[0], ch[1], 0), g.data(), g.size()).ok());
      }
      ASSERT_TRUE(store.WaitForStep(1, step, absl::Now() + absl::Seconds(10), kLo, kHi).ok());
      const float scale = ApplyDeltas(store, *codec, 1, step, w);
      const std::vector<float> master = Read(store, 1, step);
      for (size_t i = 0; i < w.size(); ++i) {
        // Within one rounding of this step's delta: earlier roundings were
        // carried into it, not accumulated.
        const double error = std::fabs(double{w[i]} - master[i]);
        EXPECT_LE(error, scale / 2 * 1.001 + 1e-6) << "element " << i << " at step " << step;
        largest_error = std::max(largest_error, error);
      }
    }
    EXPECT_GT(largest_error, 0) << "the deltas lost nothing: were they quantized?";
    // A reset pull: the worker holds the master exactly, that step's delta
    // is gone, and the next delta is taken from the master.
    std::vector<float> exact(kHi - kLo);
    ASSERT_TRUE(store.ReadParams(1, 40, kLo, kHi, exact.data(), /*reset_reference=*/true).ok());
    std::string block;
    EXPECT_EQ(store.ReadDelta(1, 40, 100, 104, &block).code(),
              absl::StatusCode::kFailedPrecondition);
    w = exact;
    PushAll(store, 1, 41, 0, 0.25f);
    ASSERT_TRUE(store.WaitForStep(1, 41, absl::Now() + absl::Seconds(10), kLo, kHi).ok());
    const float scale = ApplyDeltas(store, *codec, 1, 41, w);
    const std::vector<float> master = Read(store, 1, 41);
    for (size_t i = 0; i < w.size(); ++i) EXPECT_LE(std::fabs(w[i] - master[i]), scale / 2 * 1.001);
    // The delta of an older step is gone.
    EXPECT_EQ(store.ReadDelta(1, 40, 104, 107, &block).code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

TEST(RangeStore, Int8DeltaPullsRefuseWhatDoesNotFit) {
  RangeStore plain;
  Init(plain, Config(1, 1));
  PushAll(plain, 1, 1, 0, 1.f);
  std::string block;
  EXPECT_EQ(plain.ReadDelta(1, 1, 100, 104, &block).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> out(kHi - kLo);
  EXPECT_EQ(plain.ReadParams(1, 1, kLo, kHi, out.data(), /*reset_reference=*/true).code(),
            absl::StatusCode::kInvalidArgument);

  InitConfig c = Config(1, 1);
  c.pull_int8_chunk = 100;
  RangeStore bad;
  EXPECT_EQ(bad.BeginInit(c).status().code(), absl::StatusCode::kInvalidArgument);

  c.pull_int8_chunk = 256;
  RangeStore store;
  Init(store, c);
  // Before any step there is no delta; not a chunk is refused.
  EXPECT_EQ(store.ReadDelta(1, 0, 100, 104, &block).code(), absl::StatusCode::kFailedPrecondition);
  PushAll(store, 1, 1, 0, 1.f);
  EXPECT_TRUE(store.ReadDelta(1, 1, 100, 104, &block).ok());
  EXPECT_EQ(store.ReadDelta(1, 1, 100, 107, &block).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.ReadDelta(1, 1, 101, 104, &block).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.ReadDelta(2, 1, 100, 104, &block).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem

namespace tandem {
namespace shardserver {
namespace {

// The apply threads (what the shard server runs) give the same parameters
// as stepping on the push's own thread, per step and per chunk, over
// several steps of pushes from two ranks; a pull waits for its step.
TEST(RangeStore, ApplyThreadsMatchApplyingInline) {
  for (bool per_chunk : {false, true}) {
    RangeStore inline_store;
    RangeStore threaded(nullptr, /*apply_threads=*/2);
    for (RangeStore* s : {&inline_store, &threaded}) {
      InitConfig c = Config(1, 2, 0, Sgd(0.9));
      c.apply_per_chunk = per_chunk;
      Init(*s, c);
    }
    for (int64_t step = 1; step <= 4; ++step) {
      for (RangeStore* s : {&inline_store, &threaded}) {
        PushAll(*s, 1, step, 0, 0.25f * step);
        PushAll(*s, 1, step, 1, -1.f / step);
        ASSERT_TRUE(s->WaitForStep(1, step, absl::Now() + absl::Seconds(30)).ok());
      }
      EXPECT_EQ(Read(threaded, 1, step), Read(inline_store, 1, step))
          << "step " << step << (per_chunk ? " apply per chunk" : " apply per step");
    }
    EXPECT_EQ(threaded.info().step, 4);
  }
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem
