// RunLocal against the real coordinator and data server binaries, with a
// shell script standing in for the worker so that supervision (forwarding,
// failure, interrupt, clean shutdown) is tested on its own.
#include "tools/tandem/local_run.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// --mode=ok: progress line, exit 0. fail1: worker-1 fails, the rest wait to
// be stopped. err1 / kill1: worker-1 exits 3 / is killed, the rest finish.
// hang: everyone waits to be stopped.
constexpr char kFakeWorker[] = R"SH(#!/bin/sh
mode=ok
for a in "$@"; do
  case "$a" in
    --worker_id=*) id="${a#*=}" ;;
    --mode=*) mode="${a#*=}" ;;
  esac
done
echo "$id serving metrics_port=$((40000 + ${id#worker-}))" >&2
[ "$id" = worker-0 ] && echo "step 1/1 epoch 0 loss 2.3 from $id"
case "$mode" in
  ok) exit 0 ;;
  fail1) if [ "$id" = worker-1 ]; then echo "fatal: lost rank 2 in allreduce" >&2; exit 3; fi
         exec sleep 1000 ;;
  err1) if [ "$id" = worker-1 ]; then echo "fatal: gave up" >&2; exit 3; fi; exit 0 ;;
  kill1) if [ "$id" = worker-1 ]; then kill -9 $$; fi; exit 0 ;;
  hang) exec sleep 1000 ;;
esac
)SH";

class LocalRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_dir_ = TmpPath(absl::StrCat("bin-", ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    mkdir(bin_dir_.c_str(), 0755);
    const std::string src = std::getenv("TEST_SRCDIR");
    ASSERT_EQ(symlink((src + "/tandem/services/coordinator/coordinator").c_str(),
                      (bin_dir_ + "/coordinator").c_str()), 0);
    ASSERT_EQ(symlink((src + "/tandem/services/dataserver/dataserver").c_str(),
                      (bin_dir_ + "/dataserver").c_str()), 0);
    const std::string worker = bin_dir_ + "/worker";
    std::ofstream(worker) << kFakeWorker;
    chmod(worker.c_str(), 0755);
    out_path_ = bin_dir_ + "/stdout.txt";
    out_ = std::fopen(out_path_.c_str(), "w");
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override {
    if (out_ != nullptr) std::fclose(out_);
  }

  LocalOptions Options(int workers, const std::string& mode) {
    LocalOptions o;
    o.workers = workers;
    o.bin_dir = bin_dir_;
    o.run_dir = bin_dir_ + "/run";
    o.worker_args = {"--mode=" + mode};
    o.grace = absl::Seconds(10);
    return o;
  }
  std::string Output() {
    std::fflush(out_);
    return ReadFile(out_path_);
  }
  // The pid tandem recorded for `name`, and whether it is gone (reaped).
  bool Gone(const std::string& run_dir, const std::string& name) {
    int pid = 0;
    std::string text = ReadFile(run_dir + "/" + name + ".pid");
    while (!text.empty() && text.back() == '\n') text.pop_back();
    if (!absl::SimpleAtoi(text, &pid) || pid <= 0) return false;
    return kill(pid, 0) != 0;
  }

  std::string bin_dir_;
  std::string out_path_;
  std::FILE* out_ = nullptr;
};

TEST_F(LocalRunTest, AllWorkersFinishForwardsRankZeroAndPrintsMetrics) {
  LocalOptions o = Options(3, "ok");
  LocalEnv env;
  env.out = out_;
  absl::Status s = RunLocal(o, env);
  ASSERT_TRUE(s.ok()) << s << "\n" << Output();
  const std::string out = Output();
  EXPECT_TRUE(absl::StrContains(out, "run directory: " + o.run_dir)) << out;
  EXPECT_TRUE(absl::StrContains(out, "coordinator: 127.0.0.1:")) << out;
  EXPECT_TRUE(absl::StrContains(out, "metrics: coordinator http://127.0.0.1:")) << out;
  EXPECT_TRUE(absl::StrContains(out, "metrics: dataserver http://127.0.0.1:")) << out;
  EXPECT_TRUE(absl::StrContains(out, "metrics: worker-2 http://127.0.0.1:")) << out;
  EXPECT_TRUE(absl::StrContains(out, "step 1/1 epoch 0 loss 2.3 from worker-0")) << out;
  EXPECT_TRUE(absl::StrContains(out, "job finished in ")) << out;
  EXPECT_TRUE(absl::StrContains(out, "3 of 3 workers exited cleanly; logs in " + o.run_dir)) << out;
  // The end is clean: no per-worker exit lines and no log noise (the fake
  // worker's last log line is its metrics port).
  EXPECT_FALSE(absl::StrContains(out, "exited with status 0")) << out;
  EXPECT_FALSE(absl::StrContains(out, "metrics_port")) << out;
  EXPECT_EQ(out.find("metrics: "), out.find("metrics: coordinator")) << out;
  EXPECT_GT(out.find("step 1/1"), out.rfind("metrics: ")) << "addresses first, once\n" << out;
  // Workers got the flags the worker binary defines.
  const std::string cmd = ReadFile(o.run_dir + "/worker-2.cmd");
  for (const std::string& flag : std::vector<std::string>{"--coordinator=127.0.0.1:", "--data_servers=127.0.0.1:",
                           "--worker_id=worker-2", "--dataset=fashion-mnist/train",
                           "--eval_dataset=fashion-mnist/t10k", "--batch_size=64",
                           "--metrics_port=",
                           "--metrics_file=" + o.run_dir + "/metrics/worker-2.prom"}) {
    EXPECT_TRUE(absl::StrContains(cmd, flag)) << flag << " in " << cmd;
  }
  // The services' last metrics are kept for `tandem doctor --run_dir`.
  EXPECT_TRUE(absl::StrContains(ReadFile(o.run_dir + "/metrics/dataserver.prom"),
                                "tandem_data_batches_served_total"));
  EXPECT_TRUE(absl::StrContains(ReadFile(o.run_dir + "/metrics/coordinator.prom"), "tandem_"));
  // Rank 0's stdout is also kept in its log; servers were stopped.
  EXPECT_TRUE(absl::StrContains(ReadFile(o.run_dir + "/worker-0.log"), "step 1/1")) << out;
  EXPECT_TRUE(Gone(o.run_dir, "coordinator"));
  EXPECT_TRUE(Gone(o.run_dir, "dataserver"));
}

TEST_F(LocalRunTest, FailedWorkerStopsEverythingAndIsNamed) {
  LocalOptions o = Options(3, "fail1");
  LocalEnv env;
  env.out = out_;
  absl::Status s = RunLocal(o, env);
  ASSERT_FALSE(s.ok()) << Output();
  EXPECT_TRUE(absl::StrContains(s.message(), "worker-1 (pid ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "exited with status 3")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "fatal: lost rank 2 in allreduce")) << s;
  for (const char* name : {"worker-0", "worker-1", "worker-2", "coordinator", "dataserver"}) {
    EXPECT_TRUE(Gone(o.run_dir, name)) << name << " still running";
  }
}

TEST_F(LocalRunTest, KeepGoingWaitsForSurvivorsThenReportsTheFailure) {
  // With keep_going, worker-1's failure leaves the others to decide; here
  // they never exit on their own, so an interrupt ends the run.
  LocalOptions o = Options(2, "fail1");
  o.keep_going = true;
  LocalEnv env;
  env.out = out_;
  const std::string log1 = o.run_dir + "/worker-1.log";
  env.stop_requested = [&] { return absl::StrContains(ReadFile(log1), "fatal:"); };
  absl::Status s = RunLocal(o, env);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(Gone(o.run_dir, "worker-0"));
}

TEST_F(LocalRunTest, KeepGoingToleratesAKilledWorkerWhenTheOthersFinish) {
  LocalOptions o = Options(3, "kill1");
  o.keep_going = true;
  LocalEnv env;
  env.out = out_;
  absl::Status s = RunLocal(o, env);
  ASSERT_TRUE(s.ok()) << s << "\n" << Output();
  EXPECT_TRUE(absl::StrContains(Output(), "worker-1 killed by signal 9")) << Output();
  EXPECT_TRUE(absl::StrContains(Output(), "2 of 3 workers exited cleanly (1 lost)")) << Output();
  EXPECT_FALSE(absl::StrContains(Output(), "worker-2 exited")) << Output();
}

TEST_F(LocalRunTest, KeepGoingStillFailsOnAWorkerError) {
  LocalOptions o = Options(3, "err1");
  o.keep_going = true;
  LocalEnv env;
  env.out = out_;
  absl::Status s = RunLocal(o, env);
  ASSERT_FALSE(s.ok()) << Output();
  EXPECT_TRUE(absl::StrContains(s.message(), "worker-1 (pid ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "fatal: gave up")) << s;
}

TEST_F(LocalRunTest, InterruptStopsEveryProcess) {
  LocalOptions o = Options(2, "hang");
  LocalEnv env;
  env.out = out_;
  // "Ctrl-C" once the last worker has been started and logged.
  const std::string last_log = o.run_dir + "/worker-1.log";
  env.stop_requested = [&] { return absl::StrContains(ReadFile(last_log), "metrics_port"); };
  absl::Status s = RunLocal(o, env);
  ASSERT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "interrupted")) << s;
  for (const char* name : {"worker-0", "worker-1", "coordinator", "dataserver"}) {
    EXPECT_TRUE(Gone(o.run_dir, name)) << name << " still running";
  }
}

TEST_F(LocalRunTest, BadInputFailsBeforeAnythingStarts) {
  LocalOptions o = Options(0, "ok");
  LocalEnv env;
  env.out = out_;
  absl::Status s = RunLocal(o, env);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "--workers")) << s;
  EXPECT_EQ(access((o.run_dir + "/coordinator.pid").c_str(), F_OK), -1);
  for (const char* bad : {"sync", "sync_opt"}) {
    o = Options(2, "ok");
    (bad == std::string("sync") ? o.sync : o.sync_opt) = "bogus=1";
    s = RunLocal(o, env);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("--", bad, " "))) << s;
    EXPECT_EQ(access(o.run_dir.c_str(), F_OK), -1) << "nothing may start on a bad --" << bad;
  }
}

// It said "2 epoch(s)" under --max_steps and left out the precision and
// --batch auto.
TEST(JobHeaderTest, SaysHowLongWithWhatBatchAndPrecision) {
  LocalOptions o;
  std::string h = JobHeader(o);
  EXPECT_TRUE(absl::StrContains(h, ", 2 epoch(s), batch 64 per worker, ")) << h;
  EXPECT_TRUE(absl::StrContains(h, ", precision fp32, sync allreduce")) << h;
  o.max_steps = 300;
  o.precision = "bf16";
  o.batch = "auto:128,1024";
  h = JobHeader(o);
  EXPECT_TRUE(absl::StrContains(h, ", 300 steps (--max_steps), batch auto 128..1024 global, "))
      << h;
  EXPECT_FALSE(absl::StrContains(h, "epoch(s)")) << h;
  EXPECT_TRUE(absl::StrContains(h, ", precision bf16, ")) << h;
}

TEST(ParseMetricsPortTest, Forms) {
  EXPECT_EQ(ParseMetricsPort("I coordinator: listening on 1.2.3.4:5, metrics port 9100\n"), 9100);
  EXPECT_EQ(ParseMetricsPort("dataserver listening on h:1 metrics_port=9200"), 9200);
  EXPECT_EQ(ParseMetricsPort("flags --metrics_port=0\nlater metrics_port=9300"), 9300);
  EXPECT_EQ(ParseMetricsPort("dataserver listening on h:1 metrics_port=-1"), -1);
  EXPECT_EQ(ParseMetricsPort("nothing here"), -1);
}

}  // namespace
}  // namespace cli
}  // namespace tandem

namespace tandem {
namespace cli {
namespace {

bool Has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

TEST(WorkerArgvTest, CudaWorkersGetOneDeviceEachCpuWorkersNone) {
  LocalOptions o;
  DatasetFiles data;
  data.train_name = "fashion-mnist/train";
  data.eval_name = "fashion-mnist/t10k";
  o.backend = "cuda";
  for (int i = 0; i < 3; ++i) {
    auto argv = WorkerArgv(o, data, "worker", "127.0.0.1:1", "127.0.0.1:2", i, "/tmp/run");
    EXPECT_TRUE(Has(argv, absl::StrCat("--cuda_device=", i)));
    EXPECT_TRUE(Has(argv, absl::StrCat("--worker_id=worker-", i)));
    EXPECT_TRUE(Has(argv, "--backend=cuda"));
  }
  o.backend = "cpu";
  auto argv = WorkerArgv(o, data, "worker", "127.0.0.1:1", "127.0.0.1:2", 1, "/tmp/run");
  for (const std::string& a : argv) EXPECT_EQ(a.rfind("--cuda_device", 0), std::string::npos) << a;
}

TEST(WorkerArgvTest, SyncOptionsProfileAndTransportReachEveryWorker) {
  LocalOptions o;
  DatasetFiles data;
  auto defaults = WorkerArgv(o, data, "worker", "c:1", "d:2", 0, "/tmp/run");
  for (const std::string& a : defaults) {
    EXPECT_FALSE(absl::StartsWith(a, "--sync") || a == "--profile" ||
                 absl::StartsWith(a, "--transport") || absl::StartsWith(a, "--bucket_cap_mb"))
        << "the worker's defaults need no flag: " << a;
  }
  o.sync = "zero2";
  o.sync_opt = "prefetch=1,bucket_cap_mb=4";
  o.profile = true;
  o.transport = "gloo";
  o.bucket_cap_mb = 8;
  for (int i = 0; i < 2; ++i) {
    auto argv = WorkerArgv(o, data, "worker", "c:1", "d:2", i, "/tmp/run");
    EXPECT_TRUE(Has(argv, "--sync=zero2"));
    EXPECT_TRUE(Has(argv, "--sync_opt=prefetch=1,bucket_cap_mb=4"));
    EXPECT_TRUE(Has(argv, "--profile"));
    EXPECT_TRUE(Has(argv, "--transport=gloo"));
    EXPECT_TRUE(Has(argv, "--bucket_cap_mb=8"));
    for (const std::string& a : argv) EXPECT_FALSE(absl::StartsWith(a, "--node_id")) << a;
  }
}

TEST(WorkerArgvTest, SimulatedNodesGiveEachWorkerItsNodesAddressAndId) {
  LocalOptions o;
  o.nodes = 2;
  o.workers_per_node = 3;
  o.workers = 6;
  DatasetFiles data;
  for (int i = 0; i < 6; ++i) {
    const int node = i / 3 + 1;
    auto argv = WorkerArgv(o, data, "worker", "127.0.1.100:1", "127.0.1.100:2", i, "/tmp/run");
    EXPECT_TRUE(Has(argv, absl::StrCat("--host=127.0.1.", node))) << i;
    EXPECT_TRUE(Has(argv, absl::StrCat("--node_id=node-", node))) << i;
    EXPECT_EQ(WorkerHost(o, i), absl::StrCat("127.0.1.", node));
  }
  o = LocalOptions{};
  o.host = "10.0.0.5";  // without --nodes: the one host, no node id
  auto argv = WorkerArgv(o, data, "worker", "c:1", "d:2", 3, "/tmp/run");
  EXPECT_TRUE(Has(argv, "--host=10.0.0.5"));
}

}  // namespace
}  // namespace cli
}  // namespace tandem
