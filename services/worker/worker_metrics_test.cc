#include "services/worker/worker_metrics.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

// Run with OPENBLAS_CORETYPE=Sandybridge (see BUILD): OpenBLAS loads that
// kernel set and the worker reports it, with the vector width, in its
// metrics and its log line.
TEST(WorkerMetricsTest, ReportsTheBlasCoreAndVectorWidthInUse) {
  auto m = Metrics::Create(MetricsOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  auto w = WorkerMetrics::Create(m->get(), "allreduce");
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string text = (*m)->Scrape();
  EXPECT_TRUE(absl::StrContains(text, "blas_core=\"Sandybridge\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat("vector_width=\"", numeric::VectorWidthName(),
                                                   "\"")))
      << text;
  EXPECT_EQ(WorkerMetrics::CpuKernelsDescription(),
            absl::StrCat("BLAS core Sandybridge, vector width ", numeric::VectorWidthName()));
}

// A strategy that only reports fixed stats and memory.
class FixedSync final : public sync::GradientSync {
 public:
  FixedSync(sync::SyncStats stats, sync::SyncMemory memory) : stats_(stats), memory_(memory) {}
  std::string name() const override { return "fixed"; }
  optim::ParamRange owned_range() const override { return {0, 0}; }
  absl::Status BeginStep(const sync::StepOptions&) override { return absl::OkStatus(); }
  void OnGradientsReady(int64_t, int64_t) override {}
  absl::Status FinishStep(const optim::StepContext&) override { return absl::OkStatus(); }
  optim::Optimizer* optimizer() override { return nullptr; }
  sync::SyncStats stats() const override { return stats_; }
  sync::SyncMemory memory() const override { return memory_; }

 private:
  sync::SyncStats stats_;
  sync::SyncMemory memory_;
};

TEST(WorkerMetricsTest, RecordsStepPhasesAndSyncDeltas) {
  auto m = Metrics::Create(MetricsOptions{});
  ASSERT_TRUE(m.ok());
  auto w = WorkerMetrics::Create(m->get(), "allreduce");
  ASSERT_TRUE(w.ok());
  StepTimes t;
  t.forward = 0.25;
  t.total = 1;
  sync::SyncStats last, now;
  now.steps = 2;
  now.buckets = 6;
  now.bytes_sent = 1000;
  now.inter_node_bytes = 400;
  sync::SyncMemory mem;
  mem.optimizer_bytes = 12345;
  (*w)->RecordStep(t, 64, 1.5, FixedSync(now, mem), &last);
  EXPECT_EQ(last.bytes_sent, 1000);
  const std::string text = (*m)->Scrape();
  EXPECT_TRUE(absl::StrContains(text, "tandem_step_phase_seconds_total{")) << text;
  EXPECT_TRUE(absl::StrContains(text, "phase=\"forward\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_buckets")) << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_sync_inter_node_bytes_total{")) << text;
  EXPECT_TRUE(absl::StrContains(text, "} 400")) << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_buckets") && absl::StrContains(text, " 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "kind=\"optimizer\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, "} 12345")) << text;
}

TEST(WorkerMetricsTest, ExportsCompressionStats) {
  auto m = Metrics::Create(MetricsOptions{});
  ASSERT_TRUE(m.ok());
  auto w = WorkerMetrics::Create(m->get(), "compressed");
  ASSERT_TRUE(w.ok());
  sync::SyncStats last, now;
  now.steps = 1;
  now.compress_bytes_before = 8000;
  now.compress_bytes_after = 2000;
  now.uncompressed_buckets = 3;
  now.residual_norm = 0.75;
  (*w)->RecordStep(StepTimes{}, 8, 1.0, FixedSync(now, {}), &last);
  now.steps = 2;
  now.compress_bytes_before = 16000;
  now.compress_bytes_after = 3000;  // this step: 8000 -> 1000, ratio 8
  (*w)->RecordStep(StepTimes{}, 8, 1.0, FixedSync(now, {}), &last);
  const std::string text = (*m)->Scrape();
  EXPECT_TRUE(absl::StrContains(
      text, "tandem_sync_compression_bytes_total{stage=\"before\",strategy=\"compressed\"} 16000"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "tandem_sync_compression_bytes_total{stage=\"after\",strategy=\"compressed\"} 3000"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_sync_compression_ratio 8\n")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "tandem_sync_uncompressed_buckets_total{strategy=\"compressed\"} 3\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_sync_residual_norm 0.75\n")) << text;
}

}  // namespace
}  // namespace worker
}  // namespace tandem
