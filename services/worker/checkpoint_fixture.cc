#include "services/worker/checkpoint_fixture.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/sync/registry.h"

namespace tandem {
namespace worker {

std::string TmpDir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

v1::CoordinatorState SavedCoordinatorState(const std::string& state_dir) {
  v1::CoordinatorState s;
  absl::StatusOr<std::string> bytes = ReadFileToString(state_dir + "/coordinator_state.pb");
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (bytes.ok()) {
    EXPECT_TRUE(s.ParseFromString(*bytes));
  }
  return s;
}

checkpoint::WriteOptions FailFileMidWrite(int n, std::atomic<int>* files) {
  checkpoint::WriteOptions w;
  w.before_write = [n, files](uint64_t offset, uint64_t) -> absl::Status {
    const int file = offset == 0 ? files->fetch_add(1) : files->load() - 1;
    if (file == n && offset > 0) return absl::ResourceExhaustedError("test hook: disk full");
    return absl::OkStatus();
  };
  return w;
}

dataserver::DataServer* CheckpointFixture::data_ = nullptr;

void CheckpointFixture::SetUpTestSuite() {
  auto s = StartFashionMnistServer();
  ASSERT_TRUE(s.ok()) << s.status();
  data_ = s->release();
}

void CheckpointFixture::TearDownTestSuite() {
  delete data_;
  data_ = nullptr;
}

void CheckpointFixture::StartCoordinator(int workers, const std::string& state) {
  coordinator_.reset();
  ClearFinishedFlag(state);
  CoordinatorServerOptions o;
  o.coordinator.job_id = "ckpt-test";
  o.coordinator.min_workers = workers;
  o.coordinator.max_workers = workers;
  o.coordinator.settle_time = absl::ZeroDuration();
  o.coordinator.heartbeat_period = absl::Milliseconds(50);
  o.coordinator.state_dir = state;
  o.run_liveness_thread = false;
  auto s = CoordinatorServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  coordinator_ = std::move(*s);
}

std::vector<TrainerOptions> CheckpointFixture::Options(int workers, const std::string& strategy,
                                                       int max_steps, const std::string& ckpt) {
  std::vector<TrainerOptions> all;
  for (int i = 0; i < workers; ++i) {
    TrainerOptions o;
    o.coordinator = absl::StrCat("127.0.0.1:", coordinator_->port());
    o.data_servers = {data_->address()};
    o.job_id = "ckpt-test";
    o.worker_id = absl::StrCat("w", i);
    o.model = "mlp:784,16,10";
    o.batch_size = 16;
    o.optimizer = "adamw";
    o.lr = 0.01;
    o.schedule = "constant";
    o.log_every = 1;
    o.eval_dataset = "";
    o.max_steps = max_steps;
    o.checkpoint_dir = ckpt;
    o.collective_timeout = absl::Seconds(60);
    auto so = sync::ParseSyncOptions(strategy, "bucket_cap_mb=0.01");
    EXPECT_TRUE(so.ok()) << so.status();
    o.sync = *so;
    o.progress = [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
    };
    all.push_back(std::move(o));
  }
  return all;
}

std::vector<TrainerOptions> CheckpointFixture::BigOptions(int workers,
                                                          const std::string& strategy,
                                                          int max_steps, const std::string& ckpt,
                                                          int every, bool background) {
  std::vector<TrainerOptions> all = Options(workers, strategy, max_steps, ckpt);
  for (TrainerOptions& o : all) {
    o.model = kBigMlp;
    o.checkpoint_every = every;
    o.background_checkpoint = background;
  }
  return all;
}

bool CheckpointFixture::Said(const std::string& text) {
  absl::MutexLock lock(&mu_);
  for (const std::string& l : lines_) {
    if (absl::StrContains(l, text)) return true;
  }
  return false;
}

}  // namespace worker
}  // namespace tandem
