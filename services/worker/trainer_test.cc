// The trainer end to end in one process: a real CoordinatorServer and
// DataServer (port 0, the Debian Fashion-MNIST files) and two trainers on
// threads, training a small MLP over Gloo through the coordinator's store.
#include "services/worker/trainer.h"

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint/checkpoint.h"
#include "common/sync/registry.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"
#include "services/worker/trainer_threads.h"

namespace tandem {
namespace worker {
namespace {

constexpr char kModel[] = "mlp:784,32,10";

std::string TmpDir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

class TrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dataserver::DataServerOptions o;
    o.datasets = {{"fashion-mnist/train", "/usr/share/datasets/fashion-mnist/train"},
                  {"fashion-mnist/t10k", "/usr/share/datasets/fashion-mnist/t10k"}};
    auto s = dataserver::DataServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    data_ = s->release();
  }
  static void TearDownTestSuite() {
    delete data_;
    data_ = nullptr;
  }

  // The zero3 / zero2-overlap whole-worker check (below).
  void ShardedEpochEvaluates(const std::string& strategy, const std::string& opts);

  void StartCoordinator(int workers, const std::string& state_dir) {
    coordinator_.reset();
    CoordinatorServerOptions o;
    o.coordinator.job_id = "trainer-test";
    o.coordinator.min_workers = workers;
    o.coordinator.max_workers = workers;
    o.coordinator.settle_time = absl::ZeroDuration();
    o.coordinator.heartbeat_period = absl::Milliseconds(50);
    o.coordinator.state_dir = state_dir;
    o.run_liveness_thread = false;  // a loaded CI machine must not end generations
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    coordinator_ = std::move(*s);
  }

  TrainerOptions Options(int index) {
    TrainerOptions o;
    o.coordinator = absl::StrCat("127.0.0.1:", coordinator_->port());
    o.data_servers = {data_->address()};
    o.job_id = "trainer-test";
    o.worker_id = absl::StrCat("w", index);
    o.model = kModel;
    o.batch_size = 32;
    o.lr = 0.05;
    o.schedule = "constant";
    o.log_every = 10;
    o.collective_timeout = absl::Seconds(60);
    o.progress = [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
    };
    return o;
  }

  using Run = TrainerRun;
  std::vector<Run> RunAll(const std::vector<TrainerOptions>& options) {
    return RunTrainers(options);
  }

  std::vector<std::string> Lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

  static dataserver::DataServer* data_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

dataserver::DataServer* TrainerTest::data_ = nullptr;

TEST_F(TrainerTest, TwoWorkersEndIdenticalAndCommitTheFinalCheckpoint) {
  StartCoordinator(2, "");
  std::vector<TrainerOptions> o = {Options(0), Options(1)};
  for (auto& x : o) {
    x.max_steps = 30;
    x.accumulation = 2;
    x.checkpoint_dir = TmpDir("ckpt_identical");
    x.checkpoint_every = 20;
    x.eval_dataset = "";
  }
  std::vector<Run> runs = RunAll(o);
  for (const Run& r : runs) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 30);
    EXPECT_FALSE(r.result->stopped);
    // 30 steps x 2 micro-batches of global batch 64.
    EXPECT_EQ(r.result->cursor.epoch, 0);
    EXPECT_EQ(r.result->cursor.step_in_epoch, 60);
  }
  ASSERT_EQ(runs[0].params.size(), runs[1].params.size());
  EXPECT_EQ(std::memcmp(runs[0].params.data(), runs[1].params.data(),
                        runs[0].params.size() * sizeof(float)),
            0)
      << "ranks diverged";
  const v1::GetJobStatusResponse status = coordinator_->core().GetJobStatus();
  EXPECT_EQ(status.state(), v1::GetJobStatusResponse::FINISHED);
  EXPECT_EQ(status.last_checkpoint().step(), 30);
  EXPECT_EQ(status.last_checkpoint().cursor().step_in_epoch(), 60);
  // The committed file holds the final parameters.
  auto c = checkpoint::ReadCheckpoint(status.last_checkpoint().path(), {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 30);
  ASSERT_EQ(c->params.size(), runs[0].params.size());
  EXPECT_EQ(std::memcmp(c->params.data(), runs[0].params.data(),
                        c->params.size() * sizeof(float)),
            0);
  EXPECT_EQ(c->optimizer_name, "sgd");
  bool saw_progress = false;
  for (const std::string& l : Lines()) {
    saw_progress |= absl::StartsWith(l, "step 30/30 epoch 1 loss ") &&
                    absl::StrContains(l, " world 2 eta ");
  }
  EXPECT_TRUE(saw_progress);
}

// Both transports carry the same sums (two ranks: a + b either way), so the
// Gloo path and the shared-memory path must train to identical parameters.
TEST_F(TrainerTest, GlooAndSharedMemoryTransportsTrainIdentically) {
  std::vector<std::vector<float>> final_params;
  for (const char* transport : {"gloo", "shm"}) {
    StartCoordinator(2, "");
    std::vector<TrainerOptions> o = {Options(0), Options(1)};
    for (auto& x : o) {
      x.max_steps = 12;
      x.transport = transport;
      x.eval_dataset = "";
    }
    std::vector<Run> runs = RunAll(o);
    for (const Run& r : runs) {
      ASSERT_TRUE(r.result.ok()) << transport << ": " << r.result.status();
      EXPECT_EQ(r.result->transport, transport);
    }
    ASSERT_EQ(runs[0].params, runs[1].params) << transport << ": ranks diverged";
    final_params.push_back(runs[0].params);
  }
  ASSERT_EQ(final_params[0].size(), final_params[1].size());
  EXPECT_EQ(std::memcmp(final_params[0].data(), final_params[1].data(),
                        final_params[0].size() * sizeof(float)),
            0)
      << "gloo and shm transports trained to different parameters";
}

TEST_F(TrainerTest, ResumesFromTheCommittedCheckpointAtItsCursor) {
  const std::string state = TmpDir("resume_state");
  const std::string ckpt = TmpDir("ckpt_resume");
  // Reference: 25 uninterrupted steps.
  StartCoordinator(2, "");
  std::vector<TrainerOptions> ref = {Options(0), Options(1)};
  for (auto& x : ref) {
    x.max_steps = 25;
    x.eval_dataset = "";
  }
  std::vector<Run> reference = RunAll(ref);
  ASSERT_TRUE(reference[0].result.ok()) << reference[0].result.status();

  // Run 1: 10 steps, checkpoint committed, job finished... so resume in a
  // restarted coordinator with the same state directory.
  StartCoordinator(2, state);
  std::vector<TrainerOptions> first = ref;
  for (auto& x : first) {
    x.coordinator = absl::StrCat("127.0.0.1:", coordinator_->port());
    x.max_steps = 10;
    x.checkpoint_dir = ckpt;
  }
  std::vector<Run> one = RunAll(first);
  ASSERT_TRUE(one[0].result.ok()) << one[0].result.status();
  ASSERT_TRUE(one[1].result.ok()) << one[1].result.status();
  ASSERT_EQ(coordinator_->core().GetJobStatus().last_checkpoint().step(), 10);

  // The job finished at max_steps 10; a new job id would not see the
  // checkpoint, so clear the finished flag the way an operator extending a
  // run would: restart the coordinator over a state without it.
  coordinator_.reset();
  {
    v1::CoordinatorState s;
    std::string bytes;
    FILE* f = std::fopen((state + "/coordinator_state.pb").c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
    std::fclose(f);
    ASSERT_TRUE(s.ParseFromString(bytes));
    EXPECT_TRUE(s.finished());
    s.set_finished(false);
    f = std::fopen((state + "/coordinator_state.pb").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string out = s.SerializeAsString();
    ASSERT_EQ(std::fwrite(out.data(), 1, out.size(), f), out.size());
    std::fclose(f);
  }
  StartCoordinator(2, state);
  std::vector<TrainerOptions> second = first;
  for (auto& x : second) {
    x.coordinator = absl::StrCat("127.0.0.1:", coordinator_->port());
    x.max_steps = 25;
    x.seed = 1;  // same data order; the model init is overwritten by the checkpoint
  }
  std::vector<Run> two = RunAll(second);
  for (const Run& r : two) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 25);
    // 15 batches of 64 cut from the checkpoint's sample 10 x 64.
    // The same sample position as the uninterrupted run's 25 x 64.
    EXPECT_EQ(r.result->cursor, (data::Cursor{0, 15, 10 * 64}));
    EXPECT_EQ(reference[0].result->cursor, (data::Cursor{0, 25, 0}));
  }
  bool resumed = false;
  for (const std::string& l : Lines()) {
    resumed |= absl::StrContains(l, "resumed from ") && absl::StrContains(l, "at step 10 ");
  }
  EXPECT_TRUE(resumed);
  // Steps 11..25 saw the same batches with the same optimizer state: the
  // parameters match the uninterrupted run bit for bit.
  ASSERT_EQ(two[0].params.size(), reference[0].params.size());
  EXPECT_EQ(std::memcmp(two[0].params.data(), reference[0].params.data(),
                        two[0].params.size() * sizeof(float)),
            0);
  EXPECT_EQ(coordinator_->core().GetJobStatus().last_checkpoint().step(), 25);
}

TEST_F(TrainerTest, OneEpochEvaluatesOnTheTestSet) {
  StartCoordinator(2, "");
  std::vector<TrainerOptions> o = {Options(0), Options(1)};
  for (auto& x : o) {
    x.batch_size = 100;
    x.lr = 0.1;
    x.log_every = 0;
  }
  std::vector<Run> runs = RunAll(o);
  for (const Run& r : runs) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 300);  // 60000 / (100 x 2)
    EXPECT_EQ(r.result->cursor.epoch, 1);
    // Both ranks hold the summed counts.
    EXPECT_GE(r.result->test_accuracy, 0.75);
  }
  EXPECT_EQ(runs[0].result->test_accuracy, runs[1].result->test_accuracy);
  bool line = false;
  for (const std::string& l : Lines()) {
    line |= absl::StartsWith(l, "epoch 1 test accuracy ") &&
            absl::StrContains(l, "(10000 samples)");
  }
  EXPECT_TRUE(line);
}

// A strategy that is the model's parameter hook (zero3; zero2 overlap=1)
// through the whole worker: three ranks with accumulation and clipping
// train an epoch and evaluate; 10000 test samples in global batches of 303
// leave one sample for the last batch, so two ranks have none and must
// still join every layer's gather. Every rank ends holding the same whole
// parameter vector.
TEST_F(TrainerTest, Zero3OneEpochWithAccumulationEvaluatesOnTheTestSet) {
  ShardedEpochEvaluates("zero3", "bucket_cap_mb=0.01,max_grad_norm=5");
}

TEST_F(TrainerTest, Zero2OverlappedGatherOneEpochWithAccumulationEvaluates) {
  ShardedEpochEvaluates("zero2", "bucket_cap_mb=0.01,max_grad_norm=5");
}

void TrainerTest::ShardedEpochEvaluates(const std::string& strategy, const std::string& opts) {
  StartCoordinator(3, "");
  std::vector<TrainerOptions> o = {Options(0), Options(1), Options(2)};
  for (auto& x : o) {
    x.batch_size = 101;
    x.accumulation = 2;
    x.lr = 0.1;
    x.log_every = 0;
    auto so = sync::ParseSyncOptions(strategy, opts);
    ASSERT_TRUE(so.ok()) << so.status();
    x.sync = *so;
  }
  std::vector<Run> runs = RunAll(o);
  for (const Run& r : runs) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_EQ(r.result->steps, 99);  // 60000 / (101 x 2 micro-batches x 3)
    EXPECT_EQ(r.result->cursor.epoch, 1);
    EXPECT_GE(r.result->test_accuracy, 0.75);
    EXPECT_EQ(r.params, runs[0].params);
  }
  EXPECT_EQ(runs[0].result->test_accuracy, runs[2].result->test_accuracy);
  bool finite = !runs[0].params.empty();
  for (float v : runs[0].params) finite = finite && std::isfinite(v);
  EXPECT_TRUE(finite);
  bool line = false;
  for (const std::string& l : Lines()) {
    line |= absl::StartsWith(l, "epoch 1 test accuracy ") &&
            absl::StrContains(l, "(10000 samples)");
  }
  EXPECT_TRUE(line);
}

TEST_F(TrainerTest, UnknownDatasetNamesWhatIsServed) {
  StartCoordinator(1, "");
  TrainerOptions o = Options(0);
  o.dataset = "mnist/train";
  auto t = Trainer::Create(o);
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = (*t)->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "fashion-mnist/train")) << r.status();
}

TEST_F(TrainerTest, UnreachableCoordinatorFailsAfterBoundedRetries) {
  TrainerOptions o;
  o.coordinator = "127.0.0.1:1";
  o.data_servers = {data_->address()};
  o.worker_id = "w";
  o.model = kModel;
  o.connect_attempts = 2;
  auto t = Trainer::Create(o);
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = (*t)->Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "127.0.0.1:1")) << r.status();
}

// The seam: a strategy registered only by linking a test-only target
// (//common/sync/testing:test_strategies) trains through the unchanged
// worker, and its one-shot allreduce reaches the same parameters as the
// bucketed one (two ranks: a + b either way).
TEST_F(TrainerTest, StrategyRegisteredByATestTargetTrainsThroughTheWorker) {
  std::vector<std::vector<float>> final_params;
  for (const char* strategy : {"allreduce", "naive_allreduce"}) {
    StartCoordinator(2, "");
    std::vector<TrainerOptions> o = {Options(0), Options(1)};
    for (auto& x : o) {
      x.max_steps = 12;
      x.eval_dataset = "";
      auto so = sync::ParseSyncOptions(strategy, std::string(strategy) == "naive_allreduce"
                                                     ? "chunks=3"
                                                     : "bucket_cap_mb=0.01");
      ASSERT_TRUE(so.ok()) << so.status();
      x.sync = *so;
    }
    std::vector<Run> runs = RunAll(o);
    for (const Run& r : runs) {
      ASSERT_TRUE(r.result.ok()) << strategy << ": " << r.result.status();
      EXPECT_EQ(r.result->strategy, strategy);
      EXPECT_EQ(r.result->steps, 12);
    }
    ASSERT_EQ(runs[0].params, runs[1].params) << strategy << ": ranks diverged";
    final_params.push_back(runs[0].params);
  }
  ASSERT_EQ(final_params[0].size(), final_params[1].size());
  EXPECT_EQ(std::memcmp(final_params[0].data(), final_params[1].data(),
                        final_params[0].size() * sizeof(float)),
            0);
}

// A STOP from the coordinator reaches both ranks; they stop at the same
// step, write and commit a checkpoint there and leave.
TEST_F(TrainerTest, StopCommandEndsBothRanksAtTheSameCheckpointedStep) {
  StartCoordinator(2, "");
  std::vector<TrainerOptions> o = {Options(0), Options(1)};
  CoordinatorServer* coordinator = coordinator_.get();
  for (auto& x : o) {
    x.max_steps = 100000;
    x.eval_dataset = "";
    x.log_every = 5;
    x.checkpoint_dir = TmpDir("ckpt_stop");
    auto keep = x.progress;
    x.progress = [keep, coordinator](const std::string& line) {
      keep(line);
      if (absl::StartsWith(line, "step 10/")) coordinator->core().RequestStop("operator stop");
    };
  }
  std::vector<Run> runs = RunAll(o);
  for (const Run& r : runs) {
    ASSERT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_TRUE(r.result->stopped);
    EXPECT_GE(r.result->steps, 10);
    EXPECT_LT(r.result->steps, 100000);
  }
  EXPECT_EQ(runs[0].result->steps, runs[1].result->steps);
  EXPECT_EQ(runs[0].params, runs[1].params);
  EXPECT_EQ(coordinator_->core().GetJobStatus().last_checkpoint().step(), runs[0].result->steps);
  bool said = false;
  for (const std::string& l : Lines()) {
    said |= absl::StartsWith(l, absl::StrCat("stopping at step ", runs[0].result->steps, ": "));
  }
  EXPECT_TRUE(said);
}

// The coordinator disappears mid-run: the worker notices within
// coordinator_lost_after, stops at a step boundary and, unable to re-join,
// fails naming the lost coordinator (bounded, no hang).
TEST_F(TrainerTest, LostCoordinatorEndsTheRunNamingIt) {
  StartCoordinator(1, "");
  TrainerOptions o = Options(0);
  o.epochs = 20;  // far longer than detection takes
  o.eval_dataset = "";
  o.log_every = 5;
  o.connect_attempts = 2;
  o.coordinator_lost_after = absl::Milliseconds(200);
  CoordinatorServer* coordinator = coordinator_.get();
  auto keep = o.progress;
  o.progress = [keep, coordinator](const std::string& line) {
    keep(line);
    if (absl::StartsWith(line, "step 5/")) coordinator->Shutdown();
  };
  std::vector<Run> runs = RunAll({o});
  ASSERT_FALSE(runs[0].result.ok());
  EXPECT_TRUE(absl::IsUnavailable(runs[0].result.status())) << runs[0].result.status();
  EXPECT_TRUE(absl::StrContains(runs[0].result.status().message(), "lost the coordinator"))
      << runs[0].result.status();
}

// A configuration error (here --transport=shm for ranks on two nodes) ends
// the run at once on every rank instead of being retried as a re-join.
TEST_F(TrainerTest, ConfigurationErrorFailsAtOnceWithoutRejoining) {
  StartCoordinator(2, "");
  std::vector<TrainerOptions> o = {Options(0), Options(1)};
  o[1].hostname = "localhost";  // another node name: local_world_size 1
  for (auto& x : o) {
    x.transport = "shm";
    x.max_steps = 5;
    x.eval_dataset = "";
  }
  std::vector<Run> runs = RunAll(o);
  for (const Run& r : runs) {
    ASSERT_FALSE(r.result.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.result.status())) << r.result.status();
    EXPECT_TRUE(absl::StrContains(r.result.status().message(), "--transport=shm"))
        << r.result.status();
  }
  EXPECT_EQ(coordinator_->core().GetJobStatus().generation(), 1);
}

TEST(TrainerOptionsTest, BadOptionsAreRefusedNamingTheFlag) {
  TrainerOptions good;
  good.coordinator = "127.0.0.1:7000";
  good.data_servers = {"127.0.0.1:7100"};
  good.worker_id = "w";
  EXPECT_TRUE(ValidateTrainerOptions(good).ok());
  struct Case {
    std::function<void(TrainerOptions&)> edit;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {[](TrainerOptions& o) { o.model = "resnet:50"; }, "--model"},
      {[](TrainerOptions& o) { o.coordinator = ""; }, "--coordinator"},
      {[](TrainerOptions& o) { o.data_servers = {"nohostport"}; }, "--data_servers"},
      {[](TrainerOptions& o) { o.epochs = 0; }, "--epochs"},
      {[](TrainerOptions& o) { o.batch_size = 0; }, "--batch_size"},
      {[](TrainerOptions& o) { o.accumulation = 0; }, "--accumulation"},
      {[](TrainerOptions& o) { o.optimizer = "lamb"; }, "--optimizer"},
      {[](TrainerOptions& o) { o.lr_scaling = "cubic"; }, "--lr_scaling"},
      {[](TrainerOptions& o) { o.schedule = "step"; }, "--schedule"},
      {[](TrainerOptions& o) { o.lr = -1; }, "--lr"},
      {[](TrainerOptions& o) { o.backend = "tpu"; }, "--backend"},
      {[](TrainerOptions& o) { o.sync.bucket_cap_mb = 0; }, "--bucket_cap_mb"},
      {[](TrainerOptions& o) { o.sync.strategy = "bogus"; }, "allreduce"},
      {[](TrainerOptions& o) { o.sync.opts["no_such_key"] = "1"; }, "no_such_key"},
  };
  for (const Case& c : cases) {
    TrainerOptions o = good;
    c.edit(o);
    absl::Status s = ValidateTrainerOptions(o);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.mentions << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.mentions)) << s;
  }
  EXPECT_FALSE(Trainer::Create([&] {
                 TrainerOptions o = good;
                 o.model = "mlp:784";
                 return o;
               }()).ok());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
