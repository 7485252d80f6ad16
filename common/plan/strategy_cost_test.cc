#include "common/plan/strategy_cost.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/nn/model_spec.h"
#include "common/plan/collective_cost.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/zero/zero_sync.h"
#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

PlanRequest MlpRequest(const char* spec, int nodes, int per_node, double link_bits) {
  auto s = nn::ParseModelSpec(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  auto cost = ModelCostOf(*s);
  EXPECT_TRUE(cost.ok()) << cost.status();
  PlanRequest r;
  r.model = *cost;
  r.batch = 64;
  r.cluster.nodes = nodes;
  r.cluster.per_node = per_node;
  r.cluster.link_bits_per_s = link_bits;
  return r;
}

Prediction MustPredict(const PlanRequest& r, const std::string& strategy) {
  auto p = Predict(r, strategy);
  EXPECT_TRUE(p.ok()) << strategy << ": " << p.status();
  return p.ok() ? *p : Prediction{};
}

TEST(StrategyCostTest, BytesPerNodeLinkAreTheHandWorkedOnes) {
  PlanRequest r = MlpRequest("mlp:784,1024,1024,10", 2, 2, 1e9);
  r.cluster.servers = 2;
  const double p = r.model.flat_size * 4.0;
  // Flat ring over 4 ranks: a node's link carries one rank's 2 * 3/4 * P.
  EXPECT_DOUBLE_EQ(MustPredict(r, "allreduce").node_link_bytes, 1.5 * p);
  // Hierarchical: 2 rings (one per local rank) over 2 nodes on P/2 each:
  // 2 * (2 * 1/2 * P/2) = P.
  EXPECT_DOUBLE_EQ(MustPredict(r, "hier").node_link_bytes, p);
  // ps: both ranks of a node push all of P; hybrid: the node pushes P once.
  EXPECT_DOUBLE_EQ(MustPredict(r, "ps").node_link_bytes, 2 * p);
  EXPECT_DOUBLE_EQ(MustPredict(r, "hybrid").node_link_bytes, p);
  // zero1: allreduce + allgather of parameters = 2 * 3/4 P + 3/4 P.
  EXPECT_DOUBLE_EQ(MustPredict(r, "zero1").node_link_bytes, 2.25 * p);
  // int8 moves a little over a quarter of allreduce's bytes.
  const double int8 = MustPredict(r, "compressed:int8").node_link_bytes;
  EXPECT_GT(int8, 0.25 * 1.5 * p);
  EXPECT_LT(int8, 0.26 * 1.5 * p);
}

// PowerSGD rank 4 on the MLP: each weight sends P (rows x 4) and Q (cols x
// 4), the biases go whole: P side 1024*4 + 1024 + 1024*4 + 1024 + 10*4 + 10,
// Q side 784*4 + 1024*4 + 1024*4 floats, in ring allreduces.
TEST(StrategyCostTest, PowerSgdSendsTheFactorsAndTheVectors) {
  PlanRequest r = MlpRequest("mlp:784,1024,1024,10", 2, 2, 1e9);
  const double floats = (4096 + 1024 + 4096 + 1024 + 40 + 10) + (3136 + 4096 + 4096);
  const Prediction p = MustPredict(r, "compressed:powersgd=4");
  EXPECT_DOUBLE_EQ(p.node_link_bytes, 1.5 * floats * 4);
  EXPECT_TRUE(p.lossy);
  // At a rank no weight compresses at, everything goes whole (P side only).
  const Prediction whole = MustPredict(r, "compressed:powersgd=1000");
  EXPECT_DOUBLE_EQ(whole.node_link_bytes, 1.5 * r.model.parameters * 4);
  EXPECT_FALSE(Predict(r, "compressed:powersgd=0").ok());
}

TEST(StrategyCostTest, PowerSgdSendsEmbeddingTablesWhole) {
  // The GPT's token (256 x 64) and position (16 x 64) tables go as fp32
  // (embeddings=0, the codec's default) instead of as rank-4 factors.
  PlanRequest r = MlpRequest("gpt:layers=1,heads=1,width=64,context=16,vocab=256", 2, 2, 1e9);
  const Prediction whole = MustPredict(r, "compressed:powersgd=4");
  std::fill(r.model.embeddings_backward.begin(), r.model.embeddings_backward.end(), false);
  const Prediction factored = MustPredict(r, "compressed:powersgd=4");
  const double tables = 256 * 64 + 16 * 64, factors = 4 * (256 + 64) + 4 * (16 + 64);
  EXPECT_DOUBLE_EQ(whole.node_link_bytes - factored.node_link_bytes, 1.5 * (tables - factors) * 4);
}

TEST(StrategyCostTest, CommunicationOnlyCostsWhatBackwardCannotHide) {
  // A fast link and small buckets: every bucket but the last hides behind
  // backward (with the default 25 MiB cap this model is a single bucket).
  PlanRequest fast = MlpRequest("mlp:784,1024,1024,10", 2, 1, 100e9);
  fast.bucket_cap_mb = 1;
  Prediction f = MustPredict(fast, "allreduce");
  EXPECT_LT(f.exposed_comm_s, f.comm_s);
  EXPECT_EQ(f.bottleneck, "compute");
  // A slow link: communication dominates and is named.
  PlanRequest slow = MlpRequest("mlp:784,1024,1024,10", 2, 1, 100e6);
  Prediction s = MustPredict(slow, "allreduce");
  EXPECT_EQ(s.bottleneck, "node link");
  EXPECT_GT(s.exposed_comm_s, s.forward_s + s.backward_s);
  // Exposed never exceeds the whole and the step adds up.
  for (const Prediction& p : {f, s}) {
    EXPECT_LE(p.exposed_comm_s, p.comm_s + 1e-12);
    EXPECT_DOUBLE_EQ(p.step_s, p.forward_s + p.backward_s + p.exposed_comm_s + p.finish_s);
    EXPECT_DOUBLE_EQ(p.samples_per_s, 2 * 64 / p.step_s);
  }
  // At 100 Mbit/s int8 beats fp32, and hier beats flat on 2 x 2.
  EXPECT_LT(MustPredict(slow, "compressed:int8").step_s, s.step_s);
  PlanRequest two_by_two = MlpRequest("mlp:784,1024,1024,10", 2, 2, 1e9);
  EXPECT_LT(MustPredict(two_by_two, "hier").step_s, MustPredict(two_by_two, "allreduce").step_s);
}

TEST(StrategyCostTest, RanksOfOneSimulatedHostShareItsCores) {
  PlanRequest r = MlpRequest("mlp:784,1024,10", 2, 2, 1e9);
  r.machine.cores = 2;
  const double separate = MustPredict(r, "allreduce").forward_s;
  r.cluster.one_host = true;  // 4 ranks on 2 cores: half the rate each
  EXPECT_DOUBLE_EQ(MustPredict(r, "allreduce").forward_s, 2 * separate);
}

TEST(StrategyCostTest, PredictAllIsFastestFirstAndCoversTheCluster) {
  PlanRequest r = MlpRequest("mlp:784,1024,1024,10", 2, 2, 1e9);
  r.cluster.servers = 2;
  auto all = PredictAll(r);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), PlannedStrategies(r.cluster).size());
  for (size_t i = 1; i < all->size(); ++i) EXPECT_LE((*all)[i - 1].step_s, (*all)[i].step_s);
  // One node, one rank: only allreduce is worth planning.
  EXPECT_EQ(PlannedStrategies(Cluster{}), std::vector<std::string>{"allreduce"});
}

TEST(StrategyCostTest, PipelinedPsExposesThePullOfOneChunk) {
  // After the last push, one chunk's pull is left: chunk_mb (0.25 MiB) of a
  // large vector, one server's whole 1/S range of a small one (the
  // ShardLayout cuts each server's range into chunks). Memory passes made
  // free, so finish is communication only.
  for (const char* spec : {"mlp:784,64,10", "mlp:784,1024,1024,10"}) {
    for (int servers : {2, 4}) {
      SCOPED_TRACE(absl::StrCat(spec, " servers ", servers));
      PlanRequest r = MlpRequest(spec, 2, 2, 100e6);
      r.cluster.servers = servers;
      r.machine.stream_bytes_per_s = 1e30;
      const double chunk = std::min(r.model.flat_size * 4.0 / servers, 0.25 * (1 << 20));
      const double rate = 100e6 / 8, alpha = r.machine.link_alpha_s;
      // Both ranks of a node pull: ps the same chunk, hybrid one each;
      // hybrid then lands every group of K chunks in the node (the next
      // forward's first layer is the last group to land): one shm round
      // per group, the bytes free here.
      const Prediction ps = MustPredict(r, "ps"), hybrid = MustPredict(r, "hybrid");
      const double groups = std::ceil(r.model.flat_size * 4.0 / (2 * chunk));
      EXPECT_NEAR(ps.finish_s - ps.control_s, alpha + 2 * chunk / rate, 1e-9);
      EXPECT_NEAR(hybrid.finish_s - hybrid.control_s,
                  alpha + 2 * chunk / rate + groups * r.machine.shm_alpha_s, 1e-9);
    }
  }
}

// Replicas (two or more servers, on by default): each server sends its
// range to the next server every step and receives its neighbour's, so its
// link carries 1/S of the vector once more each way. At 2 x 2 with 2
// servers on 100 Mbit/s: ps's server link 4/2 P -> 5/2 P (the node link
// 2 P), hybrid's 2/2 P -> 3/2 P (the node link P): the server links become
// the bottleneck, half a vector's time more per step for both. One server
// keeps no replica.
TEST(StrategyCostTest, ShardReplicasCarryEachServersRangeOnceMore) {
  PlanRequest on = MlpRequest("mlp:784,1024,1024,10", 2, 2, 100e6);
  on.cluster.servers = 2;
  on.machine.stream_bytes_per_s = 1e30;
  PlanRequest off = on;
  off.shard_replicas = false;
  const double p = on.model.flat_size * 4.0, rate = 100e6 / 8;
  for (const char* s : {"ps", "hybrid"}) {
    SCOPED_TRACE(s);
    const Prediction with = MustPredict(on, s), without = MustPredict(off, s);
    EXPECT_NEAR(with.comm_s - without.comm_s, 0.5 * p / rate, 1e-9);
    EXPECT_DOUBLE_EQ(with.node_link_bytes, without.node_link_bytes);
  }
  on.cluster.servers = off.cluster.servers = 1;
  EXPECT_DOUBLE_EQ(MustPredict(on, "ps").step_s, MustPredict(off, "ps").step_s);
}

// Each chunk a worker pushes and pulls costs a calibrated round of shard
// calls (ShardRoundSeconds at the host's workers): ps pushes every chunk
// (8 here: one per server's 1/8), hybrid its own 1/K (4), and the pull of
// the last chunk is one more. The ring strategies make no such calls.
TEST(StrategyCostTest, ShardCallsCostTheCalibratedRound) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 8, 2, 100e6);
  r.cluster.servers = 8;
  r.machine.cores = 2;
  r.machine.ring_round_16_s = 1e-3;
  PlanRequest c = r;
  c.machine.shard_round_16_s = 3e-3;
  for (bool one_host : {false, true}) {
    SCOPED_TRACE(one_host);
    r.cluster.one_host = c.cluster.one_host = one_host;
    // One host: 16 workers and 8 servers on 2 cores, every round stretched
    // by 24 / 16; real nodes: the call rounds of a node's 2 workers
    // (measured only at 16 here: the nearest one's).
    const double call = one_host ? 1.5 * 3e-3 : 3e-3;
    const Prediction ps = MustPredict(r, "ps"), ps_calls = MustPredict(c, "ps");
    EXPECT_NEAR(ps_calls.comm_s - ps.comm_s, 8 * call, 1e-12);
    EXPECT_NEAR(ps_calls.finish_s - ps.finish_s, call, 1e-12);
    const Prediction hy = MustPredict(r, "hybrid"), hy_calls = MustPredict(c, "hybrid");
    EXPECT_NEAR(hy_calls.comm_s - hy.comm_s, 4 * call, 1e-12);
    EXPECT_DOUBLE_EQ(MustPredict(c, "allreduce").step_s, MustPredict(r, "allreduce").step_s);
  }
}

// Simulated nodes whose shard servers run on the same cores (ps, hybrid):
// 24 processes where the rounds were calibrated among 16, so every round
// (the vote's too) and the compute stretch by 24 / 16; not for the rings,
// whose step has no servers running, nor for real nodes.
TEST(StrategyCostTest, ShardServersOnTheHostStretchItsRounds) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 8, 2, 100e6);
  r.cluster.servers = 8;
  r.machine.cores = 2;
  r.machine.ring_round_16_s = 1e-3;
  r.cluster.one_host = true;
  const Prediction ring = MustPredict(r, "allreduce"), ps = MustPredict(r, "ps");
  EXPECT_NEAR(ring.control_s, 30 * 1e-3 + 2 * 15.0 / 16 * 24 / 12.5e6, 1e-12);
  EXPECT_NEAR(ps.control_s, 30 * 1.5e-3 + 2 * 15.0 / 16 * 24 / 12.5e6, 1e-12);
  EXPECT_NEAR(ps.forward_s, 1.5 * ring.forward_s, 1e-15);
  r.cluster.one_host = false;
  EXPECT_DOUBLE_EQ(MustPredict(r, "ps").forward_s, MustPredict(r, "allreduce").forward_s);
}

// The CPU floor (one_host, a CPU profile): every process's CPU per step
// over the cores the job gets. With 16 workers and 8 servers on 2 cores
// it wins; with the same per-round and per-call costs on 4 workers it
// does not (the latency chain is longer). Its parts are the strategy's own
// counts: allreduce over 16 ranks, one bucket: 30 rounds (the vote's 30
// are step_cpu_s's); ps: one per bucket and one for the last pull,
// 8 chunk calls plus that pull.
TEST(StrategyCostTest, CpuFloorWinsWhereTheProcessesOutnumberTheCores) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 8, 2, 100e6);
  r.cluster.servers = 8;
  r.cluster.one_host = true;
  r.machine.cores = 2;
  r.machine.ring_round_16_s = 0.5e-3;
  r.machine.ring_round_cpu_16_s = 50e-6;
  r.machine.shard_call_cpu_s = 1e-3;
  r.machine.step_cpu_s = 1e-3;
  const Prediction ring = MustPredict(r, "allreduce"), ps = MustPredict(r, "ps");
  EXPECT_DOUBLE_EQ(ring.worker_rounds, 30);
  EXPECT_DOUBLE_EQ(ring.worker_calls, 0);
  EXPECT_DOUBLE_EQ(ps.worker_rounds, 2);
  EXPECT_DOUBLE_EQ(ps.worker_calls, 9);
  EXPECT_DOUBLE_EQ(ring.round_cpu_s, 50e-6);
  PlanRequest spin = r;  // a dearer round at fewer ranks is a spin: the least counts
  spin.machine.ring_round_cpu_2_s = 400e-6;
  EXPECT_DOUBLE_EQ(MustPredict(spin, "allreduce").round_cpu_s, 50e-6);
  EXPECT_NEAR(ring.host_cpu_s, 16 * (1e-3 + ring.worker_work_s + 30 * 50e-6), 1e-12);
  EXPECT_NEAR(ps.host_cpu_s, 16 * (1e-3 + ps.worker_work_s + 2 * 50e-6 + 9e-3) + ps.server_cpu_s,
              1e-12);
  // A round measured on real jobs (job_round_cpu_s) replaces the bare
  // rings' least; hier's 8-node rings take 14 rounds a bucket.
  PlanRequest job = r;
  job.machine.job_round_cpu_s = 80e-6;
  const Prediction ring_job = MustPredict(job, "allreduce"), hier_job = MustPredict(job, "hier");
  EXPECT_DOUBLE_EQ(ring_job.round_cpu_s, 80e-6);
  EXPECT_NEAR(ring_job.host_cpu_s - ring.host_cpu_s, 16 * 30 * 30e-6, 1e-12);
  EXPECT_DOUBLE_EQ(hier_job.worker_rounds, 14);
  EXPECT_GT(ps.server_cpu_s, 0);  // the optimizer step, on the servers
  EXPECT_NEAR(ps.cpu_floor_s, ps.host_cpu_s / 2, 1e-12);
  EXPECT_DOUBLE_EQ(ps.step_s, ps.cpu_floor_s);
  EXPECT_EQ(ps.bound, "CPU");
  // Half the cores taken by other work: the floor doubles.
  PlanRequest busy = r;
  busy.cluster.cpu_share = 0.5;
  EXPECT_NEAR(MustPredict(busy, "ps").step_s, 2 * ps.step_s, 1e-12);
  // Four workers and two servers, the same costs: the chain is longer.
  PlanRequest small = MlpRequest("mlp:784,64,10", 2, 2, 100e6);
  small.cluster.servers = 2;
  small.cluster.one_host = true;
  small.machine = r.machine;
  small.machine.ring_round_cpu_4_s = 200e-6;  // spins: the least (16's) counts
  for (const std::string& s : {"allreduce", "ps"}) {
    const Prediction p = MustPredict(small, s);
    EXPECT_GT(p.host_cpu_s, 0) << s;
    EXPECT_DOUBLE_EQ(p.round_cpu_s, 50e-6) << s;
    EXPECT_LT(p.cpu_floor_s, p.step_s) << s;
  }
  // Real nodes (and a gpu profile) have no floor: each node its own CPU.
  r.cluster.one_host = false;
  EXPECT_EQ(MustPredict(r, "ps").host_cpu_s, 0);
  EXPECT_LT(MustPredict(r, "ps").step_s, ps.step_s);
}

// --cpu_share outside (0, 1] is refused with what it means.
TEST(StrategyCostTest, CpuShareMustBeAShare) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 2, 2, 100e6);
  for (double bad : {0.0, -0.5, 1.5}) {
    r.cluster.cpu_share = bad;
    auto p = Predict(r, "allreduce");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find("share of this host's cores"), std::string::npos);
  }
}

// What bounds a step: the part that, made free, shortens it most.
TEST(StrategyCostTest, BoundNamesThePartThatCostsTheStepMost) {
  // A big model on a slow link between real nodes: the link.
  const Prediction link = MustPredict(MlpRequest("mlp:784,1024,1024,10", 4, 1, 10e6), "allreduce");
  EXPECT_EQ(link.bound, "link");
  EXPECT_GT(link.link_bound_s, 0.5 * link.step_s);
  // The same on one node with a slow CPU: the CPU.
  PlanRequest cpu = MlpRequest("mlp:784,1024,1024,10", 1, 4, 0);
  cpu.machine.gemm_flops_per_s = 1e9;
  EXPECT_EQ(MustPredict(cpu, "allreduce").bound, "CPU");
  // A tiny model on simulated nodes whose ring rounds are slow: latency.
  PlanRequest lat = MlpRequest("mlp:784,64,10", 8, 2, 1e9);
  lat.cluster.one_host = true;
  lat.machine.ring_round_16_s = 5e-3;
  const Prediction p = MustPredict(lat, "allreduce");
  EXPECT_EQ(p.bound, "latency");
  for (double part : {p.link_bound_s, p.cpu_bound_s, p.latency_bound_s}) {
    EXPECT_GE(part, 0);
    EXPECT_LE(part, p.step_s);
  }
}

// Every step ends with the workers' vote: a 6-float ring allreduce over the
// world, in finish; nothing on one rank.
TEST(StrategyCostTest, StepVoteIsOneTinyWorldAllreduce) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 2, 2, 100e6);
  const Prediction p = MustPredict(r, "allreduce");
  const double alpha = r.machine.link_alpha_s;
  EXPECT_NEAR(p.control_s, 6 * alpha + 1.5 * 24 / (100e6 / 8), 1e-12);
  EXPECT_GE(p.finish_s, p.control_s);
  EXPECT_DOUBLE_EQ(MustPredict(MlpRequest("mlp:784,64,10", 1, 1, 0), "allreduce").control_s, 0);
}

// Simulated nodes (one_host) pay the calibrated round of a ring of the
// world's size; real nodes the profile's link_alpha_s. Link-bound terms and
// the byte counts do not change.
TEST(StrategyCostTest, OneHostRingsPayTheCalibratedRound) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 2, 2, 100e6);
  r.machine.ring_round_4_s = 1e-3;
  const Prediction real = MustPredict(r, "allreduce");
  r.cluster.one_host = true;
  const Prediction here = MustPredict(r, "allreduce");
  // One bucket and the vote: 2 ring allreduces over 4 ranks, 6 rounds each.
  EXPECT_NEAR(here.comm_s - real.comm_s, 6 * (1e-3 - r.machine.link_alpha_s), 1e-12);
  EXPECT_NEAR(here.control_s - real.control_s, 6 * (1e-3 - r.machine.link_alpha_s), 1e-12);
  EXPECT_DOUBLE_EQ(here.node_link_bytes, real.node_link_bytes);
  // hier's 2 rings (one per local rank) span the 2 nodes: they pay the
  // 2-rank round, but run at once: while one waits out a round the other
  // sends, so the rounds cost nothing until one ring's 2 rounds and its
  // bytes outlast both rings' bytes (8.1 ms each at 100 Mbit/s).
  const double ring_bytes_s = r.model.flat_size * 4.0 / 2 / 12.5e6;
  PlanRequest h = r;
  h.machine.ring_round_2_s = 4e-3;
  EXPECT_NEAR(MustPredict(h, "hier").comm_s, MustPredict(r, "hier").comm_s, 1e-12);
  h.machine.ring_round_2_s = 10e-3;
  const double hier_more = MustPredict(h, "hier").comm_s - MustPredict(r, "hier").comm_s;
  EXPECT_NEAR(hier_more, 2 * 10e-3 + ring_bytes_s - 2 * ring_bytes_s, 1e-12);
  // A dearer round never makes a step faster.
  PlanRequest slower = r;
  slower.machine.ring_round_4_s = 2e-3;
  for (const std::string& s : PlannedStrategies(r.cluster)) {
    EXPECT_GE(MustPredict(slower, s).step_s, MustPredict(r, s).step_s - 1e-12) << s;
  }
}

// Simulated links are token buckets with a 256 KiB burst at 100 Mbit/s
// (21 ms): the step saves up to that, never going below its bytes per
// step over the rate; real links save nothing.
TEST(StrategyCostTest, SimulatedLinksBurstButKeepTheirRate) {
  PlanRequest r = MlpRequest("mlp:784,64,10", 2, 2, 100e6);
  r.cluster.servers = 2;
  for (const std::string& s : PlannedStrategies(r.cluster)) {
    EXPECT_EQ(MustPredict(r, s).burst_saved_s, 0) << s;
  }
  r.cluster.one_host = true;
  const double rate = 100e6 / 8, burst_s = 256.0 * 1024 / rate;
  for (const std::string& s : PlannedStrategies(r.cluster)) {
    SCOPED_TRACE(s);
    const Prediction p = MustPredict(r, s);
    const double nominal = p.forward_s + p.backward_s + p.exposed_comm_s + p.finish_s;
    EXPECT_DOUBLE_EQ(p.step_s, nominal - p.burst_saved_s);
    EXPECT_LE(p.burst_saved_s, burst_s + 1e-12);
    EXPECT_GE(p.burst_saved_s, 0);
    EXPECT_GE(p.step_s, p.node_link_bytes / rate - 1e-12);
  }
  // The fp32 ring's 305 KB per step (24.4 ms at the rate) saves a whole
  // burst only if the step idles that long; PowerSGD's few KB save no more
  // than their own transfer (its rounds stay).
  const Prediction ring = MustPredict(r, "allreduce");
  EXPECT_NEAR(ring.step_s, std::max(ring.node_link_bytes / rate,
                                    ring.step_s + ring.burst_saved_s - burst_s), 1e-12);
  const Prediction psgd = MustPredict(r, "compressed:powersgd=4");
  EXPECT_NEAR(psgd.burst_saved_s, psgd.node_link_bytes / rate, 1e-12);
}

// zero3 gathers its layer groups: a model that is one group (4 MiB or
// more per group, the MLP's 7.4 MB) gathers once per step (backward keeps
// forward's last group); on one node every layer is a group of its own,
// and with free compute nothing hides them: each layer is gathered in
// forward and again in backward but the last, the exposure the sum.
TEST(StrategyCostTest, Zero3GathersItsLayerGroups) {
  PlanRequest r = MlpRequest("mlp:784,1024,1024,10", 2, 2, 100e6);
  r.machine.stream_bytes_per_s = 1e30;
  const Link link{r.machine.link_alpha_s, 100e6 / 8};
  const double p = r.model.flat_size * 4.0;
  const Prediction z3 = MustPredict(r, "zero3");
  EXPECT_NEAR(z3.finish_s - z3.control_s, RingAllGatherSeconds(4, p, link), 1e-9);
  // The gradients' reduce-scatter and one gather: zero2's bytes.
  EXPECT_DOUBLE_EQ(z3.node_link_bytes, 1.5 * p);
  EXPECT_DOUBLE_EQ(MustPredict(r, "zero2").node_link_bytes, 1.5 * p);
  // One node, every pass free but a round: each of the 3 layers is
  // gathered alone in forward and again in backward but the one kept, and
  // with compute free none of them hides.
  PlanRequest one = MlpRequest("mlp:784,1024,1024,10", 1, 4, 0);
  one.machine.stream_bytes_per_s = 1e30;
  one.machine.gemm_flops_per_s = 1e30;
  const Prediction alone = MustPredict(one, "zero3");
  ASSERT_EQ(one.model.groups_backward.size(), 3u);
  EXPECT_NEAR(alone.finish_s - alone.control_s, 5 * one.machine.shm_alpha_s, 1e-12);
  // Real compute hides every gather but forward's first.
  PlanRequest slow_cpu = one;
  slow_cpu.machine.gemm_flops_per_s = 1e9;
  const Prediction hidden = MustPredict(slow_cpu, "zero3");
  EXPECT_NEAR(hidden.finish_s - hidden.control_s, one.machine.shm_alpha_s, 1e-12);
}

TEST(StrategyCostTest, BadInputIsAClearError) {
  PlanRequest r = MlpRequest("mlp:784,10", 1, 2, 0);
  auto unknown = Predict(r, "ring-of-fire");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("known: allreduce"), std::string::npos);
  auto no_servers = Predict(r, "ps");
  EXPECT_NE(no_servers.status().message().find("--shard_servers"), std::string::npos) << no_servers.status();
  PlanRequest zero_k = r;
  zero_k.cluster.per_node = 0;
  EXPECT_NE(Predict(zero_k, "allreduce").status().message().find("at least 1"), std::string::npos);
  PlanRequest bad_link = r;
  bad_link.cluster.link_bits_per_s = -1;
  EXPECT_EQ(Predict(bad_link, "allreduce").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Predict(r, "compressed:topk=2").status().code(), absl::StatusCode::kInvalidArgument);
}

// The memory the plan predicts is what the real strategies report, rank by
// rank's worst case (rank 0 owns the largest shard), at N = 3.
TEST(StrategyCostTest, MemoryEqualsWhatTheStrategiesReport) {
  const char* spec = "mlp:7,13,5";  // a flat size that 3 does not divide
  PlanRequest r = MlpRequest(spec, 1, 3, 0);
  const int64_t n = r.model.flat_size;
  ASSERT_NE(n % 3, 0);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t lo = 0;
  for (int64_t g : r.model.groups_backward) {
    ranges.push_back({lo, lo + g});
    lo += g;
  }
  std::vector<std::vector<float>> params(3, std::vector<float>(n)), grads = params;
  std::mutex mu;
  std::map<std::string, sync::SyncMemory> rank0;
  auto sgd = [](optim::ParamRange range) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    optim::SgdOptions o;
    o.momentum = 0.9f;
    ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(range, o));
    return std::unique_ptr<optim::Optimizer>(std::move(s));
  };
  auto results = comm_testing::RunGlooRanks(
      3,
      [&](int rank, Communicator& comm) -> absl::Status {
        for (sync::ZeroStage stage : {sync::ZeroStage::kOptimizer, sync::ZeroStage::kGradients}) {
          sync::ZeroSyncOptions o;
          o.stage = stage;
          o.comm = &comm;
          o.params = params[rank].data();
          o.grads = grads[rank].data();
          o.size = n;
          o.ready_ranges = ranges;
          o.make_optimizer = sgd;
          ASSIGN_OR_RETURN(auto z, sync::CreateZeroSync(std::move(o)));
          std::lock_guard<std::mutex> l(mu);
          if (rank == 0) rank0[z->name()] = z->memory();
        }
        sync::AllreduceSyncOptions a;
        a.comm = &comm;
        a.params = params[rank].data();
        a.grads = grads[rank].data();
        a.size = n;
        a.ready_ranges = ranges;
        ASSIGN_OR_RETURN(a.optimizer, sgd({0, n}));
        ASSIGN_OR_RETURN(auto s, sync::CreateAllreduceSync(std::move(a)));
        std::lock_guard<std::mutex> l(mu);
        if (rank == 0) rank0["allreduce"] = s->memory();
        return absl::OkStatus();
      });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(rank0.size(), 3u);
  for (const auto& [name, real] : rank0) {
    SCOPED_TRACE(name);
    Prediction p = MustPredict(r, name);
    EXPECT_EQ(p.param_bytes, real.param_bytes);
    EXPECT_EQ(p.grad_bytes, real.grad_bytes);
    EXPECT_EQ(p.optimizer_bytes, real.optimizer_bytes);
  }
}

}  // namespace
}  // namespace plan
}  // namespace tandem
