// TrainerOptions: everything one worker process is told (flags turned into a
// struct by main.cc), and the checks that run before anything starts.
//
//   TrainerOptions o;
//   o.coordinator = "127.0.0.1:7000";  o.data_servers = {"127.0.0.1:7100"};
//   o.worker_id = "host:1234";  o.model = "mlp:784,256,10";
//   o.sync.strategy = "allreduce";   // any registered strategy (common/sync/registry.h)
//   RETURN_IF_ERROR(ValidateTrainerOptions(o));
//
// Thread-safe (a plain struct and a pure function). Failure:
// ValidateTrainerOptions returns INVALID_ARGUMENT naming the first bad flag
// and what to do; an unknown --sync or --sync_opt key lists the valid ones.
#ifndef TANDEM_SERVICES_WORKER_TRAINER_OPTIONS_H_
#define TANDEM_SERVICES_WORKER_TRAINER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/checkpoint/checkpoint.h"
#include "common/sync/registry.h"
#include "services/worker/step_precision.h"

namespace tandem {
namespace worker {

struct TrainerOptions {
  // ---- Control and data plane -------------------------------------------
  std::string coordinator;                // "host:port", required
  std::vector<std::string> data_servers;  // "host:port", at least one
  // Shard servers for --sync ps / hybrid ("host:port", in order; every
  // worker of the job lists the same ones).
  std::vector<std::string> shard_servers;
  std::string job_id = "tandem";
  std::string worker_id;                  // required; stable per process
  // The job incarnation sent with every join (JoinRequest.incarnation): one
  // id per start of the whole job; empty = unknown.
  std::string incarnation;
  std::string hostname = "127.0.0.1";     // address peers reach this worker at
  // Node this worker belongs to, for the intra-/inter-node communicator
  // groups; empty = `hostname`.
  std::string node_id;
  // ---- Model and data -----------------------------------------------------
  // nn::ParseModelSpec form: "mlp:784,1024,10" (features + class labels) or
  // "gpt:layers=4,d=256,heads=4,ctx=128" (token sequences + next tokens) or
  // "torchscript:PATH" (the user's module; built once the dataset is known).
  std::string model = "mlp:784,256,10";
  int torch_threads = 1;                  // torchscript: torch's intra-op threads
  // Also broadcast the model's buffers (BatchNorm statistics) from rank 0
  // after every step, as PyTorch DDP does by default; false: only at the
  // start of each generation and on every restore.
  bool broadcast_buffers = true;
  std::string dataset = "fashion-mnist/train";
  std::string eval_dataset = "fashion-mnist/t10k";  // empty: no evaluation
  uint64_t seed = 1;                      // model init and data order
  int epochs = 1;                         // >= 1
  int64_t max_steps = 0;                  // optimizer steps in all; 0 = all epochs
  int batch_size = 64;                    // per worker per micro-batch
  // Dynamic batch sizing (--batch auto[:MIN,MAX]): follow the coordinator's
  // global batch (samples per micro-batch over all ranks) within [batch_min,
  // batch_max]; switched at a step boundary, the data continued at the
  // exact sample, the LR rescaled by --lr_scaling. Off: batch_size x world.
  bool batch_auto = false;
  int64_t batch_min = 0;
  int64_t batch_max = 0;
  // --batch_schedule STEP:SIZE,...: after optimizer step STEP the global
  // batch is SIZE (a forced schedule, deterministic; wins over the
  // coordinator). Sorted by step.
  std::vector<std::pair<int64_t, int64_t>> batch_schedule;
  int accumulation = 1;                   // micro-batches per optimizer step
  // ---- Optimizer --------------------------------------------------------
  std::string optimizer = "sgd";          // "sgd" or "adamw"
  double lr = 0.05;                       // base learning rate (one worker)
  std::string lr_scaling = "linear";      // "linear", "sqrt", "none" (x world)
  // The global batch (samples per optimizer step) `lr` was tuned for; the
  // scaling factor is this generation's global batch over it. 0 = one
  // worker's batch_size * accumulation, so the factor is the world size.
  int64_t lr_reference_batch = 0;
  std::string schedule = "cosine";        // "constant", "cosine", "linear"
  int64_t warmup_steps = 0;
  double momentum = 0.9;                  // sgd
  bool nesterov = false;                  // sgd
  double weight_decay = 0;                // sgd: L2; adamw: decoupled
  // ---- Numerics (services/worker/step_precision.h) -----------------------
  std::string precision = "fp32";         // "fp32", "bf16", "fp16"
  // Skip a step whose summed gradients hold inf / NaN (every rank agrees);
  // stop after max_nonfinite_steps skips in a row, naming the layer.
  bool check_nonfinite = true;
  int64_t max_nonfinite_steps = 20;
  float loss_scale = 65536;               // fp16: initial dynamic loss scale
  int64_t loss_scale_growth_interval = 2000;
  // Fault tests: "STEP[@RANK]:..." steps whose gradients get an inf.
  std::string inject_nonfinite;
  // Tests (in-process fault tests): right after this step (> 0) Run returns
  // an error without leaving, as a killed worker looks to its peers.
  int64_t crash_after_step = 0;
  // ---- Gradient sync: the strategy and all its knobs (bucket_cap_mb,
  // max_grad_norm, --sync_opt keys) ----------------------------------------
  sync::SyncOptions sync;
  // ---- Checkpoints, backend ------------------------------------------------
  std::string checkpoint_dir;             // empty: no checkpoints
  int64_t checkpoint_every = 500;         // steps; 0 = only at the end
  // --checkpoint_every checkpoints are copied to a host snapshot at the step
  // boundary and written + committed by a background thread while training
  // goes on (single-file layouts: allreduce, hier, compressed); false: the
  // synchronous write that stops every rank.
  bool background_checkpoint = true;
  // After a lost worker or a scale-up, replicated strategies (allreduce,
  // hier, compressed) continue from the survivors' in-memory state at the
  // last step every one of them completed, instead of the disk checkpoint.
  bool recover_from_memory = true;
  // Sharded strategies (zero1/2/3): every this many steps each rank copies
  // its shard to host memory and to its ring neighbour, so a lost worker
  // costs at most this many steps redone (peer_replica.h); 0 = off.
  int replica_every = 5;
  bool replica_synchronous = false;  // tests: PeerReplicaOptions::synchronous
  checkpoint::WriteOptions checkpoint_write_options;  // tests: fault injection
  // "cpu", or "cuda": on a GPU (CUDA build) the model, gradients and the
  // optimizer step live on the device and the gradient mesh is NCCL (the
  // ctl mesh stays Gloo / shm); without a GPU it falls back to cpu.
  std::string backend = "cpu";
  int cuda_device = 0;                    // CUDA ordinal (--backend=cuda)
  absl::Duration collective_timeout = absl::Seconds(30);
  // Collective transport: "shm" (POSIX shared memory, every rank on this
  // node), "gloo" (TCP), or "auto": shm when every rank of the generation is
  // on this node, else gloo. Forcing shm for a generation spanning nodes is
  // a configuration error when the generation starts.
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
  // With no heartbeat reply for this long the coordinator counts as lost:
  // the ranks stop together at the next step with UNAVAILABLE.
  absl::Duration coordinator_lost_after = absl::Seconds(60);
  // Fault tests: append every trained batch's sample ids to
  // <dir>/<worker_id>.samples (services/worker/sample_log.h); empty = off.
  std::string sample_log_dir;
  // Straggler tests (--debug_extra_compute_ms, --debug_extra_data_ms): a
  // sleep per step in the forward pass (counted as compute) and before
  // each batch is taken (counted as data wait). Zero = off.
  absl::Duration debug_extra_compute;
  absl::Duration debug_extra_data;
  // ---- Output -----------------------------------------------------------
  int log_every = 50;                     // steps between progress lines; 0 = none
  // Adds a line per progress window with where a step's time went
  // (forward, backward, communication wait, optimizer, data wait).
  bool profile = false;
  int metrics_port = -1;                  // 0 = any free port, -1 = no /metrics
  // Where rank 0's progress lines go (one line each, no newline); default:
  // stdout, flushed.
  std::function<void(const std::string&)> progress;
};

// Parses --batch ("" | "fixed" | "auto" | "auto:MIN,MAX"; auto's default
// range is [batch_size, 32 x batch_size] samples per optimizer step over all
// ranks) and --batch_schedule ("STEP:SIZE,..."; steps increasing, sizes >= 1;
// SIZE is samples per micro-batch over all ranks) into `o` (after
// batch_size is set). INVALID_ARGUMENT naming the flag and what is wrong.
absl::Status ParseBatchFlags(const std::string& batch, const std::string& schedule,
                             TrainerOptions* o);

// The largest per-rank micro-batch the options can ask for (buffers are
// sized for it once): batch_size, or the largest global batch of --batch
// auto / --batch_schedule (a world of one).
int64_t LocalBatchCapacity(const TrainerOptions& o);

// The forced schedule's global batch after `step` optimizer steps (0: none
// applies yet).
int64_t ScheduledGlobalBatch(const TrainerOptions& o, int64_t step);

// INVALID_ARGUMENT naming the first bad field.
absl::Status ValidateTrainerOptions(const TrainerOptions& options);

// A --sync strategy that takes the SGD momentum over (sync::TakesMomentum:
// compressed with momentum_correction=1) needs --optimizer sgd and no
// --nesterov: INVALID_ARGUMENT naming the flags otherwise. Part of
// ValidateTrainerOptions; the generation checks it again before building
// the optimizer without momentum.
absl::Status CheckStrategyMomentum(const TrainerOptions& options);
// Whether the generation gives the SGD momentum to the strategy (and builds
// the optimizer without it): sync::TakesMomentum, unless that is only the
// strategy's default (no momentum_correction key) and --optimizer adamw or
// --nesterov keep their own momentum.
bool StrategyAppliesMomentum(const TrainerOptions& options);

// The numerics flags as StepPrecision's options (INVALID_ARGUMENT naming a
// bad flag: precision, loss scale, --inject_nonfinite syntax, ...).
absl::StatusOr<StepPrecisionOptions> MakeStepPrecisionOptions(const TrainerOptions& options);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_TRAINER_OPTIONS_H_
