#include "common/plan/gpu_profile.h"

#include <algorithm>

#include "common/nn/model_spec.h"
#include "common/plan/collective_cost.h"
#include "common/plan/model_cost.h"
#include "common/plan/strategy_cost.h"
#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

MachineProfile H100() {
  auto p = GpuProfile({});
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : MachineProfile{};
}

PlanRequest Gpt2Small(int nodes, int per_node) {
  auto spec = nn::ParseModelSpec("gpt:layers=12,heads=12,width=768,context=1024,vocab=50304");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto cost = ModelCostOf(*spec);
  EXPECT_TRUE(cost.ok()) << cost.status();
  PlanRequest r;
  r.model = *cost;
  r.batch = 8;
  r.optimizer = "adamw";
  r.cluster.nodes = nodes;
  r.cluster.per_node = per_node;
  r.machine = H100();
  return r;
}

Prediction MustPredict(const PlanRequest& r, const std::string& strategy) {
  auto p = Predict(r, strategy);
  EXPECT_TRUE(p.ok()) << strategy << ": " << p.status();
  return p.ok() ? *p : Prediction{};
}

TEST(GpuProfileTest, RatesAreTheDatasheetTimesTheStatedEfficiency) {
  const MachineProfile p = H100();
  EXPECT_EQ(p.kind, "gpu");
  EXPECT_DOUBLE_EQ(p.gemm_flops_per_s, 989.4e12 * 0.5);
  EXPECT_DOUBLE_EQ(p.stream_bytes_per_s, 3.35e12 * 0.8);
  EXPECT_DOUBLE_EQ(p.intra_node_bytes_per_s, 450e9 * 0.8);
  EXPECT_DOUBLE_EQ(p.memory_bytes_per_rank, 80e9);
  EXPECT_NE(p.source.find("datasheet-derived, not measured"), std::string::npos) << p.source;
  auto a100_tf32 = GpuProfile({"a100", "tf32", 0.6, 0.8});
  ASSERT_TRUE(a100_tf32.ok());
  EXPECT_DOUBLE_EQ(a100_tf32->gemm_flops_per_s, 156e12 * 0.6);
  auto h200 = GpuProfile({"h200", "bf16", 0.5, 0.8});
  ASSERT_TRUE(h200.ok());
  EXPECT_GT(h200->stream_bytes_per_s, p.stream_bytes_per_s);  // HBM3e
}

TEST(GpuProfileTest, BadChoicesAreRefusedWithTheKnownOnes) {
  auto gpu = GpuProfile({"v100", "bf16", 0.5, 0.8});
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("known: h200, h100, a100"), std::string::npos);
  auto math = GpuProfile({"h100", "fp8", 0.5, 0.8});
  ASSERT_FALSE(math.ok());
  EXPECT_NE(math.status().message().find("known: bf16, tf32, fp32"), std::string::npos);
  EXPECT_FALSE(GpuProfile({"h100", "bf16", 0, 0.8}).ok());
  EXPECT_FALSE(GpuProfile({"h100", "bf16", 0.5, 1.5}).ok());
}

// Each rank has its own device: eight on a node compute as fast as one,
// where a CPU host's ranks share its cores.
TEST(GpuProfileTest, RanksOfANodeDoNotShareTheDevice) {
  const Prediction one = MustPredict(Gpt2Small(1, 1), "allreduce");
  const Prediction eight = MustPredict(Gpt2Small(1, 8), "allreduce");
  EXPECT_DOUBLE_EQ(one.forward_s, eight.forward_s);
  const PlanRequest r = Gpt2Small(1, 8);
  EXPECT_DOUBLE_EQ(eight.forward_s, r.model.forward_flops * r.batch / (989.4e12 * 0.5));
  PlanRequest cpu = r;
  cpu.machine = MachineProfile{};
  cpu.machine.cores = 2;
  EXPECT_DOUBLE_EQ(MustPredict(cpu, "allreduce").forward_s,
                   cpu.model.forward_flops * cpu.batch / (cpu.machine.gemm_flops_per_s * 2 / 8));
}

// Inside a node the allreduce is NCCL's ring over NVLink; across nodes
// without --link, the ring's slowest hop is the profile's node network.
TEST(GpuProfileTest, CollectivesUseNvlinkInsideANodeAndTheNodeNetworkAcross) {
  PlanRequest r = Gpt2Small(1, 8);
  r.bucket_cap_mb = 1e6;  // one bucket: comm_s is one collective
  const double bytes = r.model.flat_size * 4.0;
  const Link nvlink{5e-6, 450e9 * 0.8};
  EXPECT_DOUBLE_EQ(MustPredict(r, "allreduce").comm_s, RingAllReduceSeconds(8, bytes, nvlink));
  r.cluster.nodes = 2;
  const Link network{15e-6, 3.2e12 * 0.8 / 8};
  EXPECT_DOUBLE_EQ(MustPredict(r, "allreduce").comm_s, RingAllReduceSeconds(16, bytes, network));
  // hier: 8 rings (one per local rank) on 1/8 each at once over the node
  // network: all their bytes, or one ring's rounds and bytes if longer.
  const double rings = std::max(RingAllReduceSeconds(2, bytes / 8, network),
                                8 * RingAllReduceBytes(2, bytes / 8) / network.bytes_per_s);
  EXPECT_DOUBLE_EQ(MustPredict(r, "hier").comm_s,
                   RingReduceScatterSeconds(8, bytes, nvlink) + rings +
                       RingAllGatherSeconds(8, bytes, nvlink));
}

// A model whose replicated state exceeds the device's memory is marked as
// not fitting; sharding it over enough ranks fits.
TEST(GpuProfileTest, MemoryBeyondTheDeviceIsMarked) {
  auto spec = nn::ParseModelSpec("gpt:layers=40,heads=40,width=5120,context=2048,vocab=50304");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto cost = ModelCostOf(*spec);
  ASSERT_TRUE(cost.ok());
  PlanRequest r = Gpt2Small(16, 8);
  r.model = *cost;  // about 13 billion parameters: 16 bytes each with AdamW
  r.batch = 1;
  EXPECT_FALSE(MustPredict(r, "allreduce").fits);
  EXPECT_TRUE(MustPredict(r, "zero3").fits);
  EXPECT_TRUE(MustPredict(Gpt2Small(16, 8), "allreduce").fits);
}

}  // namespace
}  // namespace plan
}  // namespace tandem
