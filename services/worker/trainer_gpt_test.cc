// GPT through the worker: byte-level text (the Debian `fortunes` files,
// converted by tools/convert into record shards in TEST_TMPDIR) served by a
// real DataServer, trained by real Trainers over the coordinator's store.
// Skips, saying why, when the fortunes package is not installed.
#include <sys/stat.h>

#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"
#include "services/worker/trainer.h"
#include "services/worker/trainer_threads.h"
#include "tools/convert/convert.h"

namespace tandem {
namespace worker {
namespace {

constexpr char kFortunes[] = "/usr/share/games/fortunes";
constexpr char kModel[] = "gpt:layers=2,heads=2,d=32,ctx=16";

class TrainerGptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    struct stat st;
    if (stat(kFortunes, &st) != 0) GTEST_SKIP() << kFortunes << " missing: tools/setup.sh installs fortunes";
    auto files = convert::TextFilesIn(kFortunes);
    ASSERT_TRUE(files.ok()) << files.status();
    ASSERT_FALSE(files->empty());
    const std::string root = std::getenv("TEST_TMPDIR");
    convert::ShardOutput train{root + "/train", "fortunes"};
    convert::ShardOutput eval{root + "/eval", "fortunes"};
    mkdir(train.out_dir.c_str(), 0755);
    mkdir(eval.out_dir.c_str(), 0755);
    convert::TextOptions to;
    to.seq_len = 16;
    // Three files keep the run short and the set large enough.
    std::vector<std::string> some(files->begin(), files->begin() + std::min<size_t>(3, files->size()));
    auto r = convert::TextToShards(some, to, train, eval);
    ASSERT_TRUE(r.ok()) << r.status();
    dataserver::DataServerOptions o;
    o.datasets = {{"text/train", train.out_dir}, {"text/eval", eval.out_dir}};
    auto s = dataserver::DataServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    data_ = std::move(*s);
  }

  void StartCoordinator(int workers) {
    CoordinatorServerOptions o;
    o.coordinator.job_id = "gpt-test";
    o.coordinator.min_workers = workers;
    o.coordinator.max_workers = workers;
    o.coordinator.settle_time = absl::ZeroDuration();
    o.run_liveness_thread = false;
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    coordinator_ = std::move(*s);
  }

  TrainerOptions Options(int index, int batch) {
    TrainerOptions o;
    o.coordinator = absl::StrCat("127.0.0.1:", coordinator_->port());
    o.data_servers = {data_->address()};
    o.job_id = "gpt-test";
    o.worker_id = absl::StrCat("w", index);
    o.model = kModel;
    o.dataset = "text/train";
    o.eval_dataset = "";
    o.batch_size = batch;
    o.optimizer = "adamw";
    o.lr = 1e-3;
    o.lr_scaling = "none";  // equal updates whatever the world size
    o.schedule = "constant";
    o.log_every = 0;
    return o;
  }

  using Run = TrainerRun;
  std::vector<Run> RunAll(const std::vector<TrainerOptions>& options) {
    return RunTrainers(options);
  }

  std::unique_ptr<dataserver::DataServer> data_;
  std::unique_ptr<CoordinatorServer> coordinator_;
};

// The equivalence for GPT through the whole worker: 2 workers at
// batch 4 end within 1e-5 of one worker at batch 8 (same global batches,
// same order; the mean of two means of 4 equals the mean of 8).
TEST_F(TrainerGptTest, TwoWorkersEqualOneAtTwiceTheBatch) {
  StartCoordinator(1);
  std::vector<TrainerOptions> one = {Options(0, 8)};
  one[0].max_steps = 6;
  std::vector<Run> single = RunAll(one);
  ASSERT_TRUE(single[0].result.ok()) << single[0].result.status();

  StartCoordinator(2);
  std::vector<TrainerOptions> two = {Options(0, 4), Options(1, 4)};
  for (auto& o : two) o.max_steps = 6;
  std::vector<Run> pair = RunAll(two);
  for (const Run& r : pair) ASSERT_TRUE(r.result.ok()) << r.result.status();
  ASSERT_EQ(pair[0].params, pair[1].params);
  ASSERT_EQ(pair[0].params.size(), single[0].params.size());
  double max_diff = 0;
  for (size_t i = 0; i < single[0].params.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(pair[0].params[i]) - single[0].params[i]));
  }
  EXPECT_LE(max_diff, 1e-5);
  EXPECT_NEAR(pair[0].result->final_loss, single[0].result->final_loss, 1e-4);
}

// Loss falls on the text in a short run (from ~ln 256 = 5.55 at the start).
TEST_F(TrainerGptTest, LossFallsOnText) {
  StartCoordinator(1);
  std::vector<TrainerOptions> o = {Options(0, 16)};
  o[0].max_steps = 150;
  o[0].lr = 3e-3;
  std::vector<Run> r = RunAll(o);
  ASSERT_TRUE(r[0].result.ok()) << r[0].result.status();
  EXPECT_LT(r[0].result->final_loss, 4.0);
}

}  // namespace
}  // namespace worker
}  // namespace tandem
