// Trainer: one worker process's training loop (DESIGN.md "One training
// step", "Failure model"), minus flag parsing.
//
//   TrainerOptions o;
//   o.coordinator = "127.0.0.1:7000";  o.data_servers = {"127.0.0.1:7100"};
//   o.worker_id = "host:1234";  o.model = "mlp:784,256,10";
//   ASSIGN_OR_RETURN(auto trainer, Trainer::Create(o));
//   ASSIGN_OR_RETURN(TrainResult r, trainer->Run());
//
// Per generation: join the coordinator -> two communicator meshes through
// the coordinator's KV store (shared memory when every rank of the
// generation is on this node, else Gloo TCP; see `transport`) ("gen<G>/grad" for the gradient sync's thread,
// "gen<G>/ctl" for the trainer thread's small collectives) -> the state
// comes from rank 0 (the last committed checkpoint it reads, or the seeded
// initialisation) and is broadcast to every rank (parameters, optimizer
// state, step, data cursor: no shared filesystem needed) -> AllreduceSync ->
// PrefetchClient at the cursor (global batch = batch_size * world) -> steps
// with `accumulation` micro-batches each. After every step the ranks agree,
// with one 3-float max-allreduce, on what the heartbeats said (STOP, REJOIN,
// coordinator lost), so they all act at the same step.
//
//  - every `checkpoint_every` steps and at the end, rank 0 writes
//    <checkpoint_dir>/step-<N>.tckpt (params, optimizer state, step, cursor)
//    and commits it to the coordinator;
//  - at each epoch end every rank evaluates a 1/N slice of eval_dataset and
//    the counts are summed over the ctl mesh: rank 0 prints the accuracy;
//  - REJOIN or a failed collective (reported with ReportFailure): drop the
//    meshes and the sync, join again, reload the last committed checkpoint;
//  - STOP: checkpoint, Leave, return with stopped = true;
//  - done: checkpoint, Leave(finished).
//
// Thread-safety: Run() once, from one thread. Owns backend, model, metrics.
// Failure: Create() refuses bad options and unknown models (INVALID_ARGUMENT
// naming the field). Run() returns the coordinator's error when it cannot
// join (unreachable after bounded retries, job finished), the data server's
// for an unknown dataset, and after a failed collective that cannot be
// recovered an error naming the operation, the rank and the coordinator's
// reason (which names the lost rank).
#ifndef TANDEM_SERVICES_WORKER_TRAINER_H_
#define TANDEM_SERVICES_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data/sampler.h"
#include "common/kernels/backend.h"
#include "common/metrics/metrics.h"
#include "common/nn/model.h"

namespace tandem {
namespace worker {

struct TrainerOptions {
  // ---- Control and data plane -------------------------------------------
  std::string coordinator;                // "host:port", required
  std::vector<std::string> data_servers;  // "host:port", at least one
  std::string job_id = "tandem";
  std::string worker_id;                  // required; stable per process
  std::string hostname = "127.0.0.1";     // address peers reach this worker at
  // ---- Model and data -----------------------------------------------------
  std::string model = "mlp:784,256,10";   // nn::ParseModelSpec form (MLP only)
  std::string dataset = "fashion-mnist/train";
  std::string eval_dataset = "fashion-mnist/t10k";  // empty: no evaluation
  uint64_t seed = 1;                      // model init and data order
  int epochs = 1;                         // >= 1
  int64_t max_steps = 0;                  // optimizer steps in all; 0 = all epochs
  int batch_size = 64;                    // per worker per micro-batch
  int accumulation = 1;                   // micro-batches per optimizer step
  // ---- Optimizer --------------------------------------------------------
  std::string optimizer = "sgd";          // "sgd" or "adamw"
  double lr = 0.05;                       // base learning rate (one worker)
  std::string lr_scaling = "linear";      // "linear", "sqrt", "none" (x world)
  std::string schedule = "cosine";        // "constant", "cosine", "linear"
  int64_t warmup_steps = 0;
  double momentum = 0.9;                  // sgd
  bool nesterov = false;                  // sgd
  double weight_decay = 0;                // sgd: L2; adamw: decoupled
  double max_grad_norm = 0;               // 0 = no clipping
  // ---- Sync, checkpoints, backend -------------------------------------------
  double bucket_cap_mb = 25;
  std::string checkpoint_dir;             // empty: no checkpoints
  int64_t checkpoint_every = 500;         // steps; 0 = only at the end
  // "cpu", or "cuda": on a GPU (CUDA build) the model, gradients and the
  // optimizer step live on the device and the gradient mesh is NCCL (the
  // ctl mesh stays Gloo / shm); without a GPU it falls back to cpu.
  std::string backend = "cpu";
  int cuda_device = 0;                    // CUDA ordinal (--backend=cuda)
  absl::Duration collective_timeout = absl::Seconds(30);
  // Collective transport: "shm" (ShmCommunicator: POSIX shared memory, every
  // rank on this node), "gloo" (TCP), or "auto": shm when the coordinator
  // says every rank of the generation is on this node (local_world_size ==
  // world_size), else gloo. Forcing shm for a generation spanning nodes is
  // an error when the generation starts.
  std::string transport = "auto";
  int max_rejoins = 20;                   // generations this worker may start
  // How long the first join waits for the rendezvous (workers starting),
  // and a re-join after a failure (survivors regrouping; past it the
  // worker exits with the failure that ended its generation).
  absl::Duration join_timeout = absl::Minutes(5);
  absl::Duration rejoin_timeout = absl::Seconds(60);
  // Attempts to reach the coordinator and the data servers at start-up
  // (backoff 100 ms doubling to 2 s: the default rides out ~15 s).
  int connect_attempts = 12;
  // ---- Output -----------------------------------------------------------
  int log_every = 50;                     // steps between progress lines; 0 = none
  int metrics_port = -1;                  // 0 = any free port, -1 = no /metrics
  // Where rank 0's progress lines go (one line each, no newline); default:
  // stdout, flushed.
  std::function<void(const std::string&)> progress;
};

// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateTrainerOptions(const TrainerOptions& options);

struct TrainResult {
  int64_t steps = 0;                 // optimizer steps applied in all (resumed included)
  data::Cursor cursor;               // data position after the last step
  bool stopped = false;              // ended by a STOP command
  int generations = 0;               // joins this worker made
  double test_accuracy = -1;         // last epoch-end evaluation, -1 if none
  std::string last_checkpoint;       // path rank 0 committed last ("" if none)
  std::string transport;             // gradient collectives of the last generation: gloo, shm or nccl
};

class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  absl::StatusOr<TrainResult> Run();

  // The model (parameters after Run, for tests).
  nn::Model& model() { return *model_; }
  // Metrics registry (nullptr before Run joins the first time).
  Metrics* metrics() { return metrics_.get(); }

 private:
  class Impl;
  explicit Trainer(TrainerOptions options);

  TrainerOptions options_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Impl> impl_;
};

// "0:02:31" for a duration in seconds (hours unbounded).
std::string FormatEta(double seconds);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_TRAINER_H_
