#include "services/worker/trainer_threads.h"

#include <thread>

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

}  // namespace worker
}  // namespace tandem
