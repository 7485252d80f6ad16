#include "services/worker/worker_metrics.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/kernels/cpu_dispatch.h"
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
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat("vector_width=\"", kernels::VectorWidthName(),
                                                   "\"")))
      << text;
  EXPECT_EQ(WorkerMetrics::CpuKernelsDescription(),
            absl::StrCat("BLAS core Sandybridge, vector width ", kernels::VectorWidthName()));
}

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
  (*w)->RecordStep(t, 64, 1.5, now, &last);
  EXPECT_EQ(last.bytes_sent, 1000);
  const std::string text = (*m)->Scrape();
  EXPECT_TRUE(absl::StrContains(text, "tandem_step_phase_seconds_total{")) << text;
  EXPECT_TRUE(absl::StrContains(text, "phase=\"forward\"")) << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_buckets")) << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_sync_inter_node_bytes_total{")) << text;
  EXPECT_TRUE(absl::StrContains(text, "} 400")) << text;
  EXPECT_TRUE(absl::StrContains(text, "tandem_buckets") && absl::StrContains(text, " 3\n")) << text;
}

}  // namespace
}  // namespace worker
}  // namespace tandem
