// tandem worker: parses flags into TrainerOptions and trains.
//
//   worker --coordinator=127.0.0.1:7000 --data_servers=127.0.0.1:7100 \
//          --model=mlp:784,1024,1024,10 --epochs=2 --batch_size=64 --lr=0.05
//
// Rank 0 prints one progress line every --log_every steps and the test
// accuracy at each epoch end to stdout. Bad flags, an unknown model or
// dataset, an unreachable coordinator: one line on stderr, exit status 1
// (2 for unparsable arguments, and for a torchscript: module refused before
// training starts); never a hang (every wait is bounded).
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "common/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/io/file.h"
#include "common/log/log.h"
#include "common/rpc/auth.h"
#include "common/rpc/tls_flags.h"
#include "common/sync/registry.h"
#include "common/trace/trace_flags.h"
#include "services/worker/trainer.h"
#include "services/worker/worker_metrics.h"

TANDEM_TLS_FLAGS();  // --tls_cert, --tls_key, --tls_ca, --tls_mutual, --tls_server_name
TANDEM_TRACE_FLAGS();  // --trace, --trace_steps, --trace_file
ABSL_FLAG(std::string, coordinator, "", "Coordinator host:port (required).");
ABSL_FLAG(std::string, data_servers, "", "Data servers, host:port[,host:port] (required).");
ABSL_FLAG(std::string, shard_servers, "",
          "Shard servers for --sync ps / hybrid, host:port[,host:port] (same list on every worker).");
ABSL_FLAG(std::string, job_id, "tandem", "Job this worker belongs to.");
ABSL_FLAG(std::string, worker_id, "", "Stable id of this worker (default host:pid).");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address peers reach this worker at.");
ABSL_FLAG(std::string, model, "mlp:784,256,10",
          "Model spec, e.g. mlp:784,1024,1024,10, gpt:layers=2,heads=4,width=64,context=32 or "
          "torchscript:PATH (a module saved with torch.jit.save; docs/user-guide.md).");
ABSL_FLAG(int, torch_threads, 1,
          "--model torchscript: torch's intra-op threads in this worker (one per worker is "
          "what data parallelism on one machine wants).");
ABSL_FLAG(bool, broadcast_buffers, true,
          "Broadcast the model's buffers (a torchscript: module's BatchNorm statistics) from rank "
          "0 after every step, as PyTorch DDP does by default; false: only when a generation "
          "starts and on every restore (each rank keeps its own statistics in between).");
ABSL_FLAG(std::string, dataset, "fashion-mnist/train", "Training dataset on the data servers.");
ABSL_FLAG(std::string, eval_dataset, "fashion-mnist/t10k",
          "Dataset for the epoch-end test accuracy (empty: none).");
ABSL_FLAG(int, epochs, 1, "Epochs to train.");
ABSL_FLAG(int, batch_size, 64, "Samples per worker per micro-batch.");
ABSL_FLAG(std::string, batch, "fixed",
          "fixed (--batch_size per worker), or auto[:MIN,MAX]: follow the coordinator's global "
          "batch (goodput-maximising, within MIN..MAX; default --batch_size..32x), switched at a "
          "step boundary with the data continued at the exact sample and lr rescaled.");
ABSL_FLAG(std::string, batch_schedule, "",
          "STEP:SIZE,...: after optimizer step STEP the global batch is SIZE (a forced, "
          "deterministic schedule; wins over the coordinator).");
ABSL_FLAG(int, accumulation, 1, "Micro-batches per optimizer step (gradient accumulation).");
ABSL_FLAG(double, lr, 0.05, "Base learning rate (for one worker; see --lr_scaling).");
ABSL_FLAG(std::string, lr_scaling, "linear", "Scale lr with world size: linear, sqrt, none.");
ABSL_FLAG(int64_t, lr_reference_batch, 0,
          "Global batch --lr was tuned for; lr scales with global batch / this (0 = one worker's "
          "batch: scale with the world size).");
ABSL_FLAG(std::string, schedule, "cosine", "LR schedule: constant, cosine, linear.");
ABSL_FLAG(int64_t, warmup_steps, 0, "Linear warm-up steps.");
ABSL_FLAG(std::string, optimizer, "sgd", "sgd or adamw.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum.");
ABSL_FLAG(bool, nesterov, false, "Nesterov momentum (sgd).");
ABSL_FLAG(double, weight_decay, 0.0, "Weight decay (sgd: L2; adamw: decoupled).");
ABSL_FLAG(double, max_grad_norm, 0.0, "Clip the global gradient norm (0: off).");
ABSL_FLAG(std::string, precision, "fp32",
          "fp32, bf16 or fp16 (fp32 master weights; bf16: bf16 GEMMs on CUDA, gradients rounded "
          "to bf16; fp16: dynamic loss scaling, gradients rounded to fp16). The CPU backend "
          "computes in fp32.");
ABSL_FLAG(bool, check_nonfinite, true,
          "Skip a step whose summed gradients hold inf / NaN (every rank agrees).");
ABSL_FLAG(int64_t, max_nonfinite_steps, 20,
          "Skipped steps in a row before the job stops with an error naming the layer.");
ABSL_FLAG(double, loss_scale, 65536.0, "fp16: initial dynamic loss scale.");
ABSL_FLAG(int64_t, loss_scale_growth_interval, 2000,
          "fp16: clean steps in a row before the loss scale doubles.");
ABSL_FLAG(std::string, inject_nonfinite, "",
          "Fault tests: STEP[@RANK]:... steps whose gradients get an inf (all ranks if no RANK).");
ABSL_FLAG(uint64_t, seed, 1, "Seed for the model initialisation and the data order.");
ABSL_FLAG(std::string, checkpoint_dir, "", "Where rank 0 writes checkpoints (empty: none).");
ABSL_FLAG(int64_t, checkpoint_every, 500, "Checkpoint every N steps (0: only at the end).");
ABSL_FLAG(bool, background_checkpoint, true,
          "Write --checkpoint_every checkpoints from a host snapshot on a background thread while "
          "training continues, for every strategy (false: stop every rank while it is written).");
ABSL_FLAG(bool, recover_from_memory, true,
          "After a lost worker or a scale-up, replicated strategies (allreduce, hier, compressed) "
          "continue from the survivors' in-memory state instead of the last disk checkpoint.");
ABSL_FLAG(int, replica_every, 5,
          "zero1/zero2/zero3: every N steps each rank copies its shard (parameters and optimizer "
          "state) to host memory and to its ring neighbour in the background, so a lost worker "
          "redoes at most N steps instead of going back to the disk checkpoint (0: off).");
ABSL_FLAG(double, bucket_cap_mb, 25.0, "Gradient bucket size in MiB (same as --sync_opt bucket_cap_mb=).");
ABSL_FLAG(std::string, sync, "allreduce",
          "Gradient sync strategy (registered: see the error for an unknown one), e.g. allreduce.");
ABSL_FLAG(std::string, sync_opt, "",
          "Strategy options key=value[,key=value]; an unknown key lists the valid ones. "
          "compressed momentum_correction=1 (topk/threshold, ef=1) applies --momentum in the "
          "strategy (DGC) and steps plain SGD: needs --optimizer sgd, no --nesterov.");
ABSL_FLAG(std::string, incarnation, "",
          "Id of this start of the whole job (tandem local makes one per run): after a "
          "restart from its state, the coordinator resumes a stored generation only for workers "
          "of the same incarnation (empty: unknown).");
ABSL_FLAG(std::string, node_id, "",
          "Node this worker belongs to, for intra-/inter-node groups (default: --host).");
ABSL_FLAG(bool, profile, false,
          "Also print where a step's time goes (forward, backward, comm wait, optimizer, data).");
ABSL_FLAG(int, metrics_port, -1, "Port for /metrics; 0 picks a free one, -1 disables.");
ABSL_FLAG(std::string, metrics_file, "",
          "When set, the final /metrics text is written here as the worker exits (for tandem "
          "doctor on a finished job).");
ABSL_FLAG(int, log_every, 50, "Steps between progress lines (0: none).");
ABSL_FLAG(double, debug_extra_compute_ms, 0,
          "Test aid: sleep this long in every step's forward pass (counted as compute), to make "
          "this worker a straggler on purpose (0: off).");
ABSL_FLAG(double, debug_extra_data_ms, 0,
          "Test aid: wait this much longer for every batch (counted as data wait) (0: off).");
ABSL_FLAG(std::string, debug_slow_worker, "",
          "Test aid: apply --debug_extra_*_ms only on the worker with this --worker_id (empty: "
          "on every worker given them).");
ABSL_FLAG(std::string, backend, "cpu", "Compute backend: cpu or cuda.");
ABSL_FLAG(int, cuda_device, 0,
          "CUDA device for --backend=cuda; one rank per GPU (tandem local gives worker i device i).");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many optimizer steps (0: all epochs).");
ABSL_FLAG(double, collective_timeout_seconds, 30.0,
          "A collective slower than this fails (how a dead peer is detected).");
ABSL_FLAG(std::string, transport, "auto",
          "Collective transport: shm (shared memory, all ranks on this node), gloo (TCP), or "
          "auto (shm when every rank is on this node).");
ABSL_FLAG(double, join_timeout_seconds, 300.0, "Longest wait for the first rendezvous.");
ABSL_FLAG(std::string, token_file, "",
          "File with the job's token every RPC must carry (empty: $TANDEM_TOKEN, else none).");
ABSL_FLAG(std::string, sample_log_dir, "",
          "Append the sample ids of every trained batch to <dir>/<worker_id>.samples (fault tests).");
ABSL_FLAG(double, rejoin_timeout_seconds, 60.0, "Longest wait for a rendezvous after a failure.");

namespace {

using tandem::worker::TrainerOptions;

// Each Read* step fills its part of TrainerOptions; a non-zero return is
// the exit status, after one line on stderr (2: unparsable flags).

// Who this worker is and what it trains on.
void ReadJobFlags(TrainerOptions* o) {
  o->coordinator = absl::GetFlag(FLAGS_coordinator);
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_data_servers), ',', absl::SkipEmpty())) {
    o->data_servers.emplace_back(s);
  }
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_shard_servers), ',', absl::SkipEmpty())) {
    o->shard_servers.emplace_back(s);
  }
  o->job_id = absl::GetFlag(FLAGS_job_id);
  o->worker_id = absl::GetFlag(FLAGS_worker_id);
  if (o->worker_id.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    o->worker_id = absl::StrCat(host, ":", getpid());
  }
  o->incarnation = absl::GetFlag(FLAGS_incarnation);
  o->hostname = absl::GetFlag(FLAGS_host);
  o->node_id = absl::GetFlag(FLAGS_node_id);
  o->model = absl::GetFlag(FLAGS_model);
  o->torch_threads = absl::GetFlag(FLAGS_torch_threads);
  o->broadcast_buffers = absl::GetFlag(FLAGS_broadcast_buffers);
  o->dataset = absl::GetFlag(FLAGS_dataset);
  o->eval_dataset = absl::GetFlag(FLAGS_eval_dataset);
}

// Batches, learning rate, optimizer, precision and checkpoints.
int ReadStepFlags(TrainerOptions* o) {
  o->epochs = absl::GetFlag(FLAGS_epochs);
  o->batch_size = absl::GetFlag(FLAGS_batch_size);
  o->accumulation = absl::GetFlag(FLAGS_accumulation);
  if (absl::Status s = tandem::worker::ParseBatchFlags(absl::GetFlag(FLAGS_batch),
                                                      absl::GetFlag(FLAGS_batch_schedule), o);
      !s.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  o->lr = absl::GetFlag(FLAGS_lr);
  o->lr_scaling = absl::GetFlag(FLAGS_lr_scaling);
  o->lr_reference_batch = absl::GetFlag(FLAGS_lr_reference_batch);
  o->precision = absl::GetFlag(FLAGS_precision);
  o->check_nonfinite = absl::GetFlag(FLAGS_check_nonfinite);
  o->max_nonfinite_steps = absl::GetFlag(FLAGS_max_nonfinite_steps);
  o->loss_scale = static_cast<float>(absl::GetFlag(FLAGS_loss_scale));
  o->loss_scale_growth_interval = absl::GetFlag(FLAGS_loss_scale_growth_interval);
  o->inject_nonfinite = absl::GetFlag(FLAGS_inject_nonfinite);
  o->schedule = absl::GetFlag(FLAGS_schedule);
  o->warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o->optimizer = absl::GetFlag(FLAGS_optimizer);
  o->momentum = absl::GetFlag(FLAGS_momentum);
  o->nesterov = absl::GetFlag(FLAGS_nesterov);
  o->weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o->seed = absl::GetFlag(FLAGS_seed);
  o->checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o->checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o->background_checkpoint = absl::GetFlag(FLAGS_background_checkpoint);
  o->recover_from_memory = absl::GetFlag(FLAGS_recover_from_memory);
  o->replica_every = absl::GetFlag(FLAGS_replica_every);
  o->max_steps = absl::GetFlag(FLAGS_max_steps);
  return 0;
}

// --sync, --sync_opt and the two knobs that may also come as flags.
int ReadSyncFlags(TrainerOptions* o) {
  auto sync = tandem::sync::ParseSyncOptions(absl::GetFlag(FLAGS_sync), absl::GetFlag(FLAGS_sync_opt));
  if (!sync.ok()) {
    std::fprintf(stderr, "worker: --sync_opt: %s\n", std::string(sync.status().message()).c_str());
    return 2;
  }
  o->sync = *sync;
  // --bucket_cap_mb / --max_grad_norm set the same knobs as --sync_opt;
  // given both ways it is an error rather than a silent choice.
  for (const char* name : {"bucket_cap_mb", "max_grad_norm"}) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    if (f->CurrentValue() == f->DefaultValue()) continue;
    if (absl::StrContains(absl::GetFlag(FLAGS_sync_opt), absl::StrCat(name, "="))) {
      std::fprintf(stderr, "worker: --%s and --sync_opt %s= both given: keep one\n", name, name);
      return 2;
    }
    if (std::string(name) == "bucket_cap_mb") {
      o->sync.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
    } else {
      o->sync.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
    }
  }
  return 0;
}

// Transport, backend, reporting and timeouts.
int ReadRuntimeFlags(TrainerOptions* o) {
  o->profile = absl::GetFlag(FLAGS_profile);
  o->metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o->log_every = absl::GetFlag(FLAGS_log_every);
  o->backend = absl::GetFlag(FLAGS_backend);
  o->cuda_device = absl::GetFlag(FLAGS_cuda_device);
  o->transport = absl::GetFlag(FLAGS_transport);
  o->sample_log_dir = absl::GetFlag(FLAGS_sample_log_dir);
  if (const std::string slow = absl::GetFlag(FLAGS_debug_slow_worker);
      slow.empty() || slow == o->worker_id) {
    o->debug_extra_compute = absl::Milliseconds(absl::GetFlag(FLAGS_debug_extra_compute_ms));
    o->debug_extra_data = absl::Milliseconds(absl::GetFlag(FLAGS_debug_extra_data_ms));
  }
  const double collective = absl::GetFlag(FLAGS_collective_timeout_seconds);
  const double join = absl::GetFlag(FLAGS_join_timeout_seconds);
  const double rejoin = absl::GetFlag(FLAGS_rejoin_timeout_seconds);
  if (!(collective > 0) || !(join > 0) || !(rejoin > 0)) {
    std::fprintf(stderr, "worker: timeouts must be positive numbers of seconds\n");
    return 1;
  }
  o->collective_timeout = absl::Seconds(collective);
  o->join_timeout = absl::Seconds(join);
  o->rejoin_timeout = absl::Seconds(rejoin);
  return 0;
}

// The job's token on every channel this process opens, and TLS on the gRPC
// plane when --tls_* are given (common/rpc/tls.h).
int InstallChannelSecurity() {
  absl::StatusOr<std::string> token = tandem::LoadAuthToken(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(token.status().message()).c_str());
    return 1;
  }
  tandem::SetDefaultAuthToken(*token);
  if (absl::Status tls = tandem::InstallTls(tandem::TlsOptionsFromFlags()); !tls.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(tls.message()).c_str());
    return 1;
  }
  return 0;
}

// Trains; writes --metrics_file whatever the outcome.
int Train(const TrainerOptions& o) {
  // The kernels this process computes with: a weak OpenBLAS core costs up
  // to 3x and is otherwise invisible (also a metric label).
  LOG(INFO) << "worker " << o.worker_id << ": "
            << tandem::worker::WorkerMetrics::CpuKernelsDescription();
  // Before the trainer (and destroyed after it): the file is written at exit.
  auto tracer = tandem::StartTraceFromFlags("worker", o.coordinator);
  if (!tracer.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(tracer.status().message()).c_str());
    return 2;
  }
  auto trainer = tandem::worker::Trainer::Create(o);
  if (!trainer.ok()) {
    std::fprintf(stderr, "worker: %s\n", std::string(trainer.status().message()).c_str());
    return 1;
  }
  auto result = (*trainer)->Run();
  if (const std::string path = absl::GetFlag(FLAGS_metrics_file);
      !path.empty() && (*trainer)->metrics() != nullptr) {
    // Whatever the outcome: a failed job's counters are what the doctor needs.
    if (absl::Status s = tandem::WriteFileAtomically(path, (*trainer)->metrics()->Scrape());
        !s.ok()) {
      std::fprintf(stderr, "worker %s: --metrics_file: %s\n", o.worker_id.c_str(),
                   std::string(s.message()).c_str());
    }
  }
  if (!result.ok()) {
    std::fprintf(stderr, "worker %s: %s\n", o.worker_id.c_str(),
                 std::string(result.status().message()).c_str());
    // A torchscript: module refused against the dataset, before training
    // started (its model is built only then): bad input, like bad flags.
    return absl::IsInvalidArgument(result.status()) && !(*trainer)->has_model() ? 2 : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tandem::flags::InstallFlagUsage("tandem worker: trains one data-parallel replica.");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "worker: unexpected argument '%s' (flags are --name=value)\n", rest[1]);
    return 2;
  }
  // Batches arrive as MB-sized gRPC messages: keep glibc from mmapping and
  // unmapping a fresh buffer for each (see common/data/prefetch_client.h).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);

  TrainerOptions o;
  ReadJobFlags(&o);
  if (int rc = ReadStepFlags(&o); rc != 0) return rc;
  if (int rc = ReadSyncFlags(&o); rc != 0) return rc;
  if (int rc = InstallChannelSecurity(); rc != 0) return rc;
  if (int rc = ReadRuntimeFlags(&o); rc != 0) return rc;
  return Train(o);
}
