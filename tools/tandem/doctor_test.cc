#include "tools/tandem/doctor.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

// What a worker's /metrics says after `steps` steps with these phase totals.
struct Phases {
  double forward, backward, comm_wait, optimizer, data_wait;
};

ProcessMetrics Worker(const std::string& name, Phases p, double steps, double sync_mib = 8,
                      double inter_mib = 0, double buckets = 3, const std::string& core = "Zen") {
  const double total = p.forward + p.backward + p.comm_wait + p.optimizer + p.data_wait;
  std::string t;
  const std::pair<const char*, double> phases[5] = {{"forward", p.forward},
                                                    {"backward", p.backward},
                                                    {"comm_wait", p.comm_wait},
                                                    {"optimizer", p.optimizer},
                                                    {"data_wait", p.data_wait}};
  for (const auto& [k, v] : phases) {
    absl::StrAppendFormat(&t, "tandem_step_phase_seconds_total{job=\"j\",phase=\"%s\"} %g\n", k, v);
  }
  absl::StrAppendFormat(&t, "tandem_step_seconds_count %g\ntandem_step_seconds_sum %g\n", steps,
                        total);
  absl::StrAppendFormat(&t, "tandem_sync_bytes_total{strategy=\"allreduce\"} %g\n",
                        sync_mib * (1 << 20) * steps);
  absl::StrAppendFormat(&t, "tandem_sync_inter_node_bytes_total{strategy=\"allreduce\"} %g\n",
                        inter_mib * (1 << 20) * steps);
  absl::StrAppendFormat(&t, "tandem_sync_seconds_total{strategy=\"allreduce\"} %g\n",
                        p.comm_wait + 0.5 * p.backward);
  absl::StrAppendFormat(&t, "tandem_buckets %g\n", buckets);
  absl::StrAppendFormat(&t, "tandem_cpu_kernels{blas_core=\"%s\",vector_width=\"avx2\"} 1\n", core);
  absl::StrAppend(&t, "tandem_sync_memory_bytes{kind=\"params\"} 7454720\n",
                  "tandem_sync_memory_bytes{kind=\"grads\"} 7454720\n",
                  "tandem_sync_memory_bytes{kind=\"optimizer\"} 7454720\n",
                  "tandem_sync_memory_bytes{kind=\"staging\"} 0\n");
  auto s = ParsePromText(t);
  EXPECT_TRUE(s.ok()) << s.status();
  return {name, *s};
}

ProcessMetrics DataServer(double batches, double decode_seconds, double queued) {
  auto s = ParsePromText(absl::StrFormat(
      "tandem_data_batches_served_total %g\ntandem_data_decode_seconds_total %g\n"
      "tandem_data_queue_depth %g\n",
      batches, decode_seconds, queued));
  EXPECT_TRUE(s.ok());
  return {"dataserver", *s};
}

DoctorOptions Avx2Machine() {
  DoctorOptions o;
  o.cpu = {};
  o.cpu.avx = o.cpu.avx2 = o.cpu.fma = o.cpu.os_avx = true;
  o.strategies = {"allreduce", "zero1", "zero2"};
  return o;
}

const Finding* FindKind(const Diagnosis& d, const std::string& kind) {
  for (const Finding& f : d.findings) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

TEST(DoctorTest, DataBoundJobIsDiagnosedWithTheServersNumbers) {
  auto d = Diagnose({Worker("worker-0", {1, 2, 0.5, 0.2, 6}, 100),
                     Worker("worker-1", {1, 2, 0.5, 0.2, 6}, 100), DataServer(200, 9, 0)},
                    Avx2Machine());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, "data-bound");
  const Finding* f = FindKind(*d, "data");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("62% of step time waits for the next batch"), std::string::npos)
      << f->evidence;
  EXPECT_NE(f->evidence.find("45.00 ms of decode thread time per batch"), std::string::npos)
      << f->evidence;
  EXPECT_NE(f->advice.find("--decode_threads"), std::string::npos);
  EXPECT_EQ(FindKind(*d, "communication"), nullptr);
}

TEST(DoctorTest, CommunicationBoundJobGetsBucketAndHierarchyAdvice) {
  DoctorOptions o = Avx2Machine();
  o.link_bits_per_s = 100e6;
  o.strategies.push_back("compressed");
  auto d = Diagnose({Worker("worker-0", {0.5, 1, 20, 0.2, 0.1}, 20, 7.1, 3.6, 1)}, o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, "communication-bound");
  const Finding* f = FindKind(*d, "communication");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("7.1 MiB per step per worker"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("3.6 MiB across nodes"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("of the 100 Mbit/s link"), std::string::npos) << f->evidence;
  EXPECT_NE(f->advice.find("bucket_cap_mb=2"), std::string::npos) << f->advice;
  EXPECT_NE(f->advice.find("hier=1"), std::string::npos);
  EXPECT_NE(f->advice.find("codec=int8"), std::string::npos);
}

// Advice that cannot change anything is not given: hier=1 to a job that
// runs it, a bucket cap to a gradient too small to split usefully (it said
// bucket_cap_mb=1 to a 0.8 MiB gradient: still one bucket).
TEST(DoctorTest, AdviceThatChangesNothingIsLeftOut) {
  DoctorOptions o = Avx2Machine();
  o.link_bits_per_s = 100e6;
  o.hier = true;
  auto d = Diagnose({Worker("worker-0", {0.5, 1, 20, 0.2, 0.1}, 20, 7.1, 3.6, 1)}, o);
  ASSERT_TRUE(d.ok()) << d.status();
  const Finding* f = FindKind(*d, "communication");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->advice.find("hier=1"), std::string::npos) << f->advice;
  EXPECT_NE(f->advice.find("bucket_cap_mb=2 (about 4 buckets of the 7.1 MiB gradient)"),
            std::string::npos)
      << f->advice;
  // A 0.8 MiB gradient in one bucket: a cap of a fifth of a MiB splits it.
  std::vector<PromSample> small = Worker("worker-0", {0.5, 1, 20, 0.2, 0.1}, 20, 0.8, 0.4, 1).samples;
  for (PromSample& s : small) {
    if (s.name == "tandem_sync_memory_bytes" && s.labels["kind"] == "grads") s.value = 0.8 * (1 << 20);
  }
  d = Diagnose({{"worker-0", small}}, o);
  ASSERT_TRUE(d.ok()) << d.status();
  f = FindKind(*d, "communication");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("bucket_cap_mb=0.2 "), std::string::npos) << f->advice;
  EXPECT_EQ(f->advice.find("bucket_cap_mb=1 "), std::string::npos) << f->advice;
  // A 0.1 MiB gradient: nothing worth overlapping, no bucket advice.
  for (PromSample& s : small) {
    if (s.name == "tandem_sync_memory_bytes" && s.labels["kind"] == "grads") s.value = 0.1 * (1 << 20);
  }
  d = Diagnose({{"worker-0", small}}, o);
  ASSERT_TRUE(d.ok()) << d.status();
  f = FindKind(*d, "communication");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->advice.find("bucket_cap_mb"), std::string::npos) << f->advice;
}

TEST(DoctorTest, ComputeBoundOnAFallbackKernelNamesTheRightOne) {
  auto d = Diagnose({Worker("worker-0", {3, 6, 0.3, 0.2, 0.1}, 50, 8, 0, 3, "Sandybridge")},
                    Avx2Machine());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, "compute-bound");
  ASSERT_FALSE(d->findings.empty());
  EXPECT_EQ(d->findings[0].kind, "kernels");  // the cheapest fix comes first
  EXPECT_NE(d->findings[0].advice.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos);
  // A weak core the environment asked for is reported as such.
  DoctorOptions user = Avx2Machine();
  user.user_coretype = "sandybridge";
  auto set = Diagnose({Worker("worker-0", {3, 6, 0.3, 0.2, 0.1}, 50, 8, 0, 3, "Sandybridge")},
                      user);
  ASSERT_TRUE(set.ok());
  EXPECT_NE(set->findings[0].advice.find("is set in the environment"), std::string::npos)
      << set->findings[0].advice;
  // On its own kernel there is nothing to fix there.
  auto fine = Diagnose({Worker("worker-0", {3, 6, 0.3, 0.2, 0.1}, 50, 8, 0, 3, "Haswell")},
                       Avx2Machine());
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(FindKind(*fine, "kernels"), nullptr);
  EXPECT_NE(FindKind(*fine, "compute"), nullptr);
}

TEST(DoctorTest, CollectiveWaitWithFewBytesIsWaitingForPeers) {
  // 0.03 MiB per step cannot take 47% of a step on any link: the ranks wait
  // for the data-starved one. The verdict follows the cause.
  auto d = Diagnose({Worker("worker-0", {0.2, 0.3, 4.7, 0.1, 4.5}, 100, 0.03),
                     Worker("worker-1", {0.2, 0.3, 4.7, 0.1, 4.5}, 100, 0.03)},
                    Avx2Machine());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, "data-bound");
  EXPECT_LT(d->comm_wire, 0.01);
  EXPECT_NE(FindKind(*d, "waiting for peers"), nullptr);
  EXPECT_EQ(FindKind(*d, "communication"), nullptr);
}

TEST(DoctorTest, StragglerIsNamed) {
  auto d = Diagnose({Worker("worker-0", {1, 2, 3, 0.1, 0.1}, 100),
                     Worker("worker-1", {1, 2, 3, 0.1, 0.1}, 100),
                     Worker("worker-2", {2, 4, 0.2, 0.1, 0.1}, 100)},
                    Avx2Machine());
  ASSERT_TRUE(d.ok()) << d.status();
  const Finding* f = FindKind(*d, "straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("worker-2 computes 60.0 ms per step"), std::string::npos)
      << f->evidence;
}

TEST(DoctorTest, StragglersTheCoordinatorNamedAreReportedWithAdviceForTheCause) {
  auto coordinator = ParsePromText(
      "tandem_straggler{job=\"j\",cause=\"compute\",rank=\"1\"} 0\n"
      "tandem_straggler{job=\"j\",cause=\"data\",rank=\"1\"} 1\n"
      "tandem_straggler{job=\"j\",cause=\"network\",rank=\"1\"} 0\n"
      "tandem_straggler{job=\"j\",cause=\"compute\",rank=\"0\"} 0\n"
      "tandem_live_workers 2\n");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const Phases even{1, 2, 3, 0.1, 0.1};
  auto d = Diagnose({Worker("worker-0", even, 100), Worker("worker-1", even, 100),
                     {"coordinator", *coordinator}},
                    Avx2Machine());
  ASSERT_TRUE(d.ok()) << d.status();
  const Finding* f = FindKind(*d, "straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->evidence.find("the coordinator names rank 1 a straggler, cause data"),
            std::string::npos)
      << f->evidence;
  EXPECT_NE(f->advice.find("--decode_threads"), std::string::npos) << f->advice;
  // Nobody named: no such line.
  auto quiet = ParsePromText("tandem_straggler{cause=\"data\",rank=\"1\"} 0\n");
  ASSERT_TRUE(quiet.ok());
  d = Diagnose({Worker("worker-0", even, 100), Worker("worker-1", even, 100),
                {"coordinator", *quiet}},
               Avx2Machine());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(FindKind(*d, "straggler"), nullptr);
}

TEST(DoctorTest, MemoryNearTheLimitSuggestsZero) {
  DoctorOptions o = Avx2Machine();
  o.memory_bytes_per_worker = 30e6;
  auto d = Diagnose({Worker("worker-0", {3, 6, 0.3, 0.2, 0.1}, 50),
                     Worker("worker-1", {3, 6, 0.3, 0.2, 0.1}, 50)},
                    o);
  ASSERT_TRUE(d.ok());
  const Finding* f = FindKind(*d, "memory");
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("--sync zero2"), std::string::npos) << f->evidence;
}

TEST(DoctorTest, NothingToDiagnoseIsAClearError) {
  auto none = Diagnose({DataServer(1, 1, 1)}, Avx2Machine());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("no worker metrics"), std::string::npos);
  auto early = Diagnose({Worker("worker-0", {0, 0, 0, 0, 0}, 0)}, Avx2Machine());
  EXPECT_NE(early.status().message().find("worker-0 has not finished a training step"),
            std::string::npos)
      << early.status();
}

TEST(DoctorTest, FormatShowsSharesVerdictAndAdvice) {
  auto d = Diagnose({Worker("worker-0", {1, 2, 0.5, 0.2, 6}, 100), DataServer(100, 4, 0)},
                    Avx2Machine());
  ASSERT_TRUE(d.ok());
  const std::string text = FormatDiagnosis(*d);
  EXPECT_NE(text.find("verdict: data-bound"), std::string::npos) << text;
  EXPECT_NE(text.find("data wait 62%"), std::string::npos) << text;
  EXPECT_NE(text.find("    -> "), std::string::npos) << text;
}

}  // namespace
}  // namespace cli
}  // namespace tandem
