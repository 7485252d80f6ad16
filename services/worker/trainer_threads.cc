#include "services/worker/trainer_threads.h"

#include <thread>

#include "common/io/file.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"

namespace tandem {
namespace worker {

std::vector<TrainerRun> RunTrainers(const std::vector<TrainerOptions>& options) {
  std::vector<TrainerRun> runs(options.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < options.size(); ++i) {
    threads.emplace_back([&, i] {
      auto t = Trainer::Create(options[i]);
      if (!t.ok()) {
        runs[i].result = t.status();
        return;
      }
      runs[i].result = (*t)->Run();
      if (!(*t)->has_model()) return;
      tensor::FlatStorage& s = (*t)->model().storage();
      runs[i].params.assign(s.params(), s.params() + s.size());
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

absl::StatusOr<std::unique_ptr<dataserver::DataServer>> StartFashionMnistServer() {
  dataserver::DataServerOptions o;
  o.datasets = {{"fashion-mnist/train", "/usr/share/datasets/fashion-mnist/train"}};
  return dataserver::DataServer::Start(o);
}

void ClearFinishedFlag(const std::string& state_dir) {
  const std::string path = state_dir + "/coordinator_state.pb";
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) return;
  v1::CoordinatorState s;
  ASSERT_TRUE(s.ParseFromString(*bytes)) << path;
  s.set_finished(false);
  ASSERT_TRUE(WriteFileAtomically(path, s.SerializeAsString()).ok()) << path;
}

}  // namespace worker
}  // namespace tandem
