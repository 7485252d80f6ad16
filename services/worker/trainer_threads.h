// Test helper: runs one Trainer per options on its own thread (the
// thread-per-rank harness of the worker's tests) and keeps each one's result
// and final parameters; and the services those tests start in-process.
//
//   std::vector<TrainerRun> runs = RunTrainers({Options(0), Options(1)});
//   ASSERT_TRUE(runs[0].result.ok());
//
// Blocks until every trainer returns. Thread-safe as far as the options'
// callbacks are.
#ifndef TANDEM_SERVICES_WORKER_TRAINER_THREADS_H_
#define TANDEM_SERVICES_WORKER_TRAINER_THREADS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/dataserver/data_server.h"
#include "services/worker/trainer.h"

namespace tandem {
namespace worker {

struct TrainerRun {
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  std::vector<float> params;  // the model's parameters after Run (empty if Create failed)
};

std::vector<TrainerRun> RunTrainers(const std::vector<TrainerOptions>& options);

// A data server on port 0 serving the Debian Fashion-MNIST training set as
// "fashion-mnist/train".
absl::StatusOr<std::unique_ptr<dataserver::DataServer>> StartFashionMnistServer();

// Clears the finished flag of the coordinator state in `state_dir` (if
// any), as an operator extending a finished job would, so a coordinator
// started over it resumes from its last checkpoint.
void ClearFinishedFlag(const std::string& state_dir);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_TRAINER_THREADS_H_
