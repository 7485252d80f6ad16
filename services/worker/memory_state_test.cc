// MemoryState on its own: three ranks on threads over Gloo, each with a
// real CPU model and SGD with momentum behind a minimal replicated
// GradientSync (this test's fake: whole owned range, no communication).
// Checks who keeps its own state, who receives it, from which rank, and
// when the disk must be used instead.
#include "services/worker/memory_state.h"

#include <memory>
#include <vector>

#include "common/comm/testing/gloo_ranks.h"
#include "common/kernels/cpu_backend.h"
#include "common/optim/sgd.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

constexpr char kModel[] = "mlp:8,4,2";

// Replicated: every rank owns [0, n) and holds the optimizer for all of it.
class FakeReplicatedSync final : public sync::GradientSync {
 public:
  explicit FakeReplicatedSync(int64_t n) : n_(n) {
    optim::SgdOptions o;
    o.momentum = 0.9f;
    optimizer_ = std::move(optim::Sgd::Create({0, n}, o)).value();
  }
  std::string name() const override { return "fake"; }
  optim::ParamRange owned_range() const override { return {0, n_}; }
  absl::Status BeginStep(const sync::StepOptions&) override { return absl::OkStatus(); }
  void OnGradientsReady(int64_t, int64_t) override {}
  absl::Status FinishStep(const optim::StepContext&) override { return absl::OkStatus(); }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }
  sync::SyncStats stats() const override { return {}; }
  sync::SyncMemory memory() const override { return {}; }

 private:
  const int64_t n_;
  std::unique_ptr<optim::Optimizer> optimizer_;
};

// One rank's process-lifetime objects: backend, model, its MemoryState.
struct Rank {
  kernels::CpuBackend backend;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<MemoryState> memory;
  explicit Rank(bool enabled) {
    nn::ModelOptions mo;
    mo.max_batch = 4;
    model = std::move(nn::CreateModel(kModel, &backend, mo)).value();
    EXPECT_TRUE(model->Initialize(7).ok());
    memory = std::make_unique<MemoryState>(enabled, &backend, model.get());
  }
  int64_t n() { return model->storage().size(); }
  std::vector<float> params() {
    const float* p = model->storage().params();
    return std::vector<float>(p, p + n());
  }
};

std::unique_ptr<Generation> MakeGeneration(int rank, int world, Communicator& comm, int64_t n) {
  auto g = std::make_unique<Generation>();
  g->join.set_rank(rank);
  g->join.set_world_size(world);
  g->ctl = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
  g->sync = std::make_unique<FakeReplicatedSync>(n);
  return g;
}

// `steps` SGD steps with gradients that depend on the step only (the same
// on every rank, as after an allreduce).
void Train(Rank& r, Generation& g, int64_t from, int64_t to) {
  std::vector<float> grad(r.n());
  for (int64_t s = from + 1; s <= to; ++s) {
    for (int64_t i = 0; i < r.n(); ++i) grad[i] = 0.01f * static_cast<float>((i + s) % 7 - 3);
    optim::StepContext ctx;
    ctx.step = s;
    ctx.lr = 0.1f;
    ASSERT_TRUE(g.sync->optimizer()->Step(r.model->storage().params(), grad.data(), r.n(), ctx).ok());
  }
}

std::vector<float> Momentum(Generation& g) {
  absl::Span<float> m = g.sync->optimizer()->state()[0].data;
  return std::vector<float>(m.begin(), m.end());
}

// Generation 1 trains ranks to `reached[r]` (-1: the rank is new and never
// trained); generation 2 restores with `committed`. Each rank's outcome,
// parameters and momentum after it.
struct After {
  MemoryRecovery rec;
  std::vector<float> params, momentum;
};
std::vector<After> TwoGenerations(const std::vector<int64_t>& reached, int64_t committed,
                                  bool enabled = true) {
  const int world = static_cast<int>(reached.size());
  std::vector<After> out(world);
  auto st = comm_testing::RunGlooRanks(world, [&](int rank, Communicator& comm) -> absl::Status {
    Rank r(enabled);
    if (reached[rank] >= 0) {
      std::unique_ptr<Generation> g1 = MakeGeneration(rank, world, comm, r.n());
      r.memory->MarkLive();  // as after generation 1's restore
      Train(r, *g1, 0, reached[rank]);
      r.memory->Retain(*g1, reached[rank], 0, reached[rank] * 12);
    }
    std::unique_ptr<Generation> g2 = MakeGeneration(rank, world, comm, r.n());
    absl::StatusOr<MemoryRecovery> rec = r.memory->TryRestore(*g2, committed);
    if (!rec.ok()) return rec.status();
    out[rank] = After{*rec, r.params(), Momentum(*g2)};
    return absl::OkStatus();
  });
  for (const absl::Status& s : st) EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(MemoryStateTest, EveryRankAtTheSameStepKeepsItsOwnState) {
  std::vector<After> a = TwoGenerations({5, 5, 5}, 4);
  for (const After& x : a) {
    EXPECT_TRUE(x.rec.restored);
    EXPECT_EQ(x.rec.step, 5);
    EXPECT_EQ(x.rec.samples_in_epoch, 60);
    EXPECT_EQ(x.rec.received, 0);
    EXPECT_EQ(x.rec.source, 0);
    EXPECT_EQ(x.params, a[0].params);
    EXPECT_EQ(x.momentum, a[0].momentum);
  }
  bool nonzero = false;
  for (float m : a[0].momentum) nonzero |= m != 0.f;
  EXPECT_TRUE(nonzero) << "the kept momentum did not reach the new optimizer";
}

// Rank 0's last step failed while ranks 1 and 2 completed it: the newest
// step wins, from the lowest rank holding it, and rank 0 receives it.
TEST(MemoryStateTest, ARankBehindReceivesTheNewestStepFromTheLowestRankHoldingIt) {
  std::vector<After> a = TwoGenerations({4, 5, 5}, 0);
  for (const After& x : a) {
    EXPECT_TRUE(x.rec.restored);
    EXPECT_EQ(x.rec.step, 5);
    EXPECT_EQ(x.rec.source, 1);
    EXPECT_EQ(x.rec.received, 1);
    EXPECT_EQ(x.rec.reached, 5);
  }
  EXPECT_EQ(a[0].params, a[1].params);
  EXPECT_EQ(a[0].momentum, a[1].momentum);
  EXPECT_EQ(a[2].params, a[1].params);
}

// A worker added to the job (it never trained) gets the state of rank 0.
TEST(MemoryStateTest, ANewRankReceivesTheState) {
  std::vector<After> a = TwoGenerations({6, 6, -1}, 5);
  EXPECT_TRUE(a[2].rec.restored);
  EXPECT_EQ(a[2].rec.step, 6);
  EXPECT_EQ(a[2].rec.source, 0);
  EXPECT_EQ(a[2].rec.received, 1);
  EXPECT_EQ(a[2].params, a[0].params);
  EXPECT_EQ(a[2].momentum, a[0].momentum);
}

TEST(MemoryStateTest, TheDiskIsUsedWhenMemoryCannotServe) {
  // A committed checkpoint newer than anything kept.
  for (const After& x : TwoGenerations({3, 3, 3}, 4)) {
    EXPECT_FALSE(x.rec.restored);
    EXPECT_EQ(x.rec.reached, 3);
  }
  // --recover_from_memory=false: the step reached is still reported.
  for (const After& x : TwoGenerations({5, 5, 5}, 2, /*enabled=*/false)) {
    EXPECT_FALSE(x.rec.restored);
    EXPECT_EQ(x.rec.reached, 5);
  }
  // A fresh set of processes (a whole-job restart).
  for (const After& x : TwoGenerations({-1, -1, -1}, 2)) {
    EXPECT_FALSE(x.rec.restored);
    EXPECT_EQ(x.rec.reached, -1);
  }
}

}  // namespace
}  // namespace worker
}  // namespace tandem
