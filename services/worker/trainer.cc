#include "services/worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint/checkpoint.h"
#include "common/comm/coordinator_store.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/data/prefetch_client.h"
#include "common/io/file.h"
#include "common/kernels/factory.h"
#include "common/log/log.h"
#include "common/optim/adamw.h"
#include "common/optim/schedule.h"
#include "common/optim/sgd.h"
#include "common/rpc/channel.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce_sync.h"
#include "proto/dataserver.grpc.pb.h"
#include "services/worker/coordinator_client.h"

#ifdef TANDEM_WITH_CUDA
#include "common/comm/nccl/nccl_communicator.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/sync/cuda_device_stepper.h"
#endif

namespace tandem {
namespace worker {
namespace {

// Errors after which a new generation may succeed: a peer died or hung, the
// generation ended under us, a connection dropped.
bool Recoverable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAborted(s) ||
         absl::IsFailedPrecondition(s) || absl::IsCancelled(s);
}

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
}

absl::Status ValidateTrainerOptions(const TrainerOptions& o) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (o.coordinator.empty()) return bad("--coordinator is empty: pass host:port");
  if (o.data_servers.empty()) return bad("--data_servers is empty: pass host:port[,host:port]");
  for (const std::string& s : o.data_servers) {
    if (s.find(':') == std::string::npos) {
      return bad(absl::StrCat("--data_servers entry '", s, "' is not host:port"));
    }
  }
  if (o.worker_id.empty()) return bad("--worker_id is empty");
  if (o.job_id.empty()) return bad("--job_id is empty");
  if (o.dataset.empty()) return bad("--dataset is empty");
  if (o.epochs < 1) return bad(absl::StrCat("--epochs is ", o.epochs, ": need at least 1"));
  if (o.max_steps < 0) return bad("--max_steps must be >= 0 (0 = all epochs)");
  if (o.batch_size < 1) return bad(absl::StrCat("--batch_size is ", o.batch_size, ": need >= 1"));
  if (o.accumulation < 1) {
    return bad(absl::StrCat("--accumulation is ", o.accumulation, ": need >= 1"));
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad("--lr must be a positive number");
  if (o.optimizer != "sgd" && o.optimizer != "adamw") {
    return bad(absl::StrCat("--optimizer '", o.optimizer, "' is unknown: use sgd or adamw"));
  }
  RETURN_IF_ERROR(Annotate(optim::ParseScalingRule(o.lr_scaling).status(), "--lr_scaling"));
  RETURN_IF_ERROR(Annotate(optim::ParseScheduleKind(o.schedule).status(), "--schedule"));
  if (o.warmup_steps < 0) return bad("--warmup_steps must be >= 0");
  if (o.momentum < 0 || o.momentum >= 1) return bad("--momentum must be in [0, 1)");
  if (o.nesterov && o.momentum == 0) return bad("--nesterov needs --momentum > 0");
  if (o.weight_decay < 0) return bad("--weight_decay must be >= 0");
  if (o.max_grad_norm < 0) return bad("max_grad_norm must be >= 0");
  if (!(o.bucket_cap_mb > 0)) return bad("--bucket_cap_mb must be > 0");
  if (o.checkpoint_every < 0) return bad("--checkpoint_every must be >= 0");
  if (o.cuda_device < 0) return bad("--cuda_device must be >= 0");
  if (o.backend != "cpu" && o.backend != "cuda") {
    return bad(absl::StrCat("--backend '", o.backend, "' is unknown: use cpu or cuda"));
  }
  if (o.transport != "auto" && o.transport != "gloo" && o.transport != "shm") {
    return bad(absl::StrCat("--transport '", o.transport, "' is unknown: use auto, gloo or shm"));
  }
  if (o.log_every < 0) return bad("--log_every must be >= 0");
  if (o.max_rejoins < 1) return bad("max_rejoins must be >= 1");
  if (o.connect_attempts < 1) return bad("connect_attempts must be >= 1");
  if (o.collective_timeout <= absl::ZeroDuration()) return bad("collective timeout must be > 0");
  absl::StatusOr<nn::ModelSpec> spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) return Annotate(spec.status(), "--model");
  if (spec->kind != nn::ModelSpec::Kind::kMlp) {
    return bad(absl::StrCat("--model '", o.model,
                            "': the worker trains MLP classifiers (mlp:in,hidden...,classes)"));
  }
  return absl::OkStatus();
}

// Everything Run() needs besides the model: the coordinator client, the data
// servers' datasets, metric handles and one generation's meshes and sync.
class Trainer::Impl {
 public:
  Impl(Trainer* t) : t_(t), o_(t->options_) {}
  ~Impl() {
    if (device_features_ != nullptr) t_->backend_->Free(device_features_);
    if (device_labels_ != nullptr) t_->backend_->Free(device_labels_);
    if (device_predictions_ != nullptr) t_->backend_->Free(device_predictions_);
  }

  absl::StatusOr<TrainResult> Run();

 private:
  enum class Outcome { kDone, kStopped, kRejoin };

  // One generation's objects; destroyed together (reverse order).
  struct Generation {
    v1::JoinResponse join;
    std::unique_ptr<CoordinatorStore> store;
    std::unique_ptr<Communicator> grad_comm;
    std::unique_ptr<Communicator> ctl_comm;
    // Device backends only: the device-side finish of the sync (outlives it).
    std::unique_ptr<sync::DeviceStepper> stepper;
    optim::Optimizer* optimizer = nullptr;  // owned by sync
    std::unique_ptr<sync::GradientSync> sync;
    std::unique_ptr<data::PrefetchClient> data;
    sync::SyncStats last_stats;
  };

  absl::Status LookUpDatasets();
  // Serves /metrics (before joining); InitMetrics adds the rank label and
  // registers the worker's metrics once the first join gave a rank.
  absl::Status StartMetrics();
  absl::Status InitMetrics(int rank);
  void Print(const std::string& line);
  absl::StatusOr<Outcome> RunGeneration(Generation& g);
  absl::Status SetUp(Generation& g);
  absl::Status RestoreState(Generation& g);
  absl::Status WriteCheckpoint(Generation& g);
  absl::Status Evaluate(Generation& g);
  absl::Status ToModelBatch(const data::HostBatch& hb, nn::Batch* out);
  absl::StatusOr<float> ReadLoss();
  bool on_device() const { return !t_->backend_->host_accessible(); }
  // Device backends: copies the device optimizer state into g.optimizer's
  // host buffers (no-op on the CPU).
  absl::Status SaveDeviceState(Generation& g);
  // Device backends: a host copy of the parameters, staged in host_params_.
  absl::StatusOr<float*> HostParams();
  void ReportFailure(Generation& g, const std::string& op, const absl::Status& s);

  Trainer* t_;
  const TrainerOptions& o_;
  std::unique_ptr<CoordinatorClient> client_;
  nn::ModelSpec spec_;
  uint64_t fingerprint_ = 0;
  int64_t train_samples_ = 0;
  int64_t eval_samples_ = 0;
  int64_t feature_width_ = 0;

  // Training state that survives generations (restored from checkpoints).
  int64_t step_ = 0;
  data::Cursor cursor_;
  TrainResult result_;
  int64_t samples_in_epoch_ = 0;  // restored position, re-cut for the new world
  int64_t checkpoint_step_ = -1;  // step of the last checkpoint written or loaded
  std::string failure_;  // the last collective failure, for the final error

  std::vector<int32_t> predictions_;  // reused by Evaluate
  // Device backends only, sized once: batches copied host -> device, the
  // argmax output, and the host staging copy of the parameters.
  float* device_features_ = nullptr;
  int32_t* device_labels_ = nullptr;
  int32_t* device_predictions_ = nullptr;
  std::vector<float> host_params_;

  // Metrics (owned by t_->metrics_).
  std::unique_ptr<data::ClientMetrics> client_metrics_;
  prometheus::Histogram* step_seconds_ = nullptr;
  prometheus::Counter* samples_total_ = nullptr;
  prometheus::Gauge* loss_gauge_ = nullptr;
  prometheus::Counter* allreduce_seconds_ = nullptr;
  prometheus::Counter* allreduce_bytes_ = nullptr;
  prometheus::Gauge* buckets_ = nullptr;
  prometheus::Gauge* generation_gauge_ = nullptr;
};

void Trainer::Impl::Print(const std::string& line) {
  if (o_.progress) {
    o_.progress(line);
  } else {
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
  }
}

absl::Status Trainer::Impl::LookUpDatasets() {
  v1::ListDatasetsResponse list;
  absl::Status last;
  // Any data server will do; they serve the same datasets.
  for (const std::string& server : o_.data_servers) {
    auto stub = v1::DataServer::NewStub(MakeChannel({.target = server}));
    RetryOptions retry;
    retry.max_attempts = o_.connect_attempts;
    retry.call_timeout = absl::Seconds(5);
    retry.wait_for_ready = false;  // a refused connection fails the attempt at once
    last = CallWithRetry(retry, absl::StrCat("DataServer.ListDatasets at ", server),
                         [&](grpc::ClientContext* ctx) {
                           return stub->ListDatasets(ctx, v1::ListDatasetsRequest(), &list);
                         });
    if (last.ok()) break;
  }
  if (!last.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach a data server (",
                                               absl::StrJoin(o_.data_servers, ", "),
                                               "): ", last.message()));
  }
  std::vector<std::string> names;
  const v1::DatasetInfo* train = nullptr;
  const v1::DatasetInfo* eval = nullptr;
  for (const v1::DatasetInfo& d : list.datasets()) {
    names.push_back(d.name());
    if (d.name() == o_.dataset) train = &d;
    if (d.name() == o_.eval_dataset) eval = &d;
  }
  const std::string known = absl::StrJoin(names, ", ");
  if (train == nullptr) {
    return absl::NotFoundError(absl::StrCat("dataset '", o_.dataset,
                                            "' is not served; the data servers have: ", known));
  }
  if (!o_.eval_dataset.empty() && eval == nullptr) {
    return absl::NotFoundError(absl::StrCat("eval dataset '", o_.eval_dataset,
                                            "' is not served; the data servers have: ", known));
  }
  feature_width_ = 1;
  for (int64_t d : train->feature_spec().shape()) feature_width_ *= d;
  const int in = spec_.mlp.widths.front();
  const int classes = spec_.mlp.widths.back();
  if (feature_width_ != in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", o_.model, "' takes ", in, " inputs but dataset '", o_.dataset, "' has ",
        feature_width_, " features per sample: make the first width ", feature_width_));
  }
  if (train->num_classes() > classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", o_.model, "' has ", classes, " classes but dataset '", o_.dataset, "' has ",
        train->num_classes(), ": make the last width ", train->num_classes()));
  }
  if (train->label_spec().dtype() != v1::DTYPE_I32) {
    return absl::InvalidArgumentError(absl::StrCat("dataset '", o_.dataset,
                                                   "' has non-int32 labels"));
  }
  train_samples_ = train->num_samples();
  eval_samples_ = eval != nullptr ? eval->num_samples() : 0;
  return absl::OkStatus();
}

absl::Status Trainer::Impl::StartMetrics() {
  MetricsOptions mo;
  mo.port = o_.metrics_port;
  mo.labels = {{"job", o_.job_id}, {"service", "worker"}};
  ASSIGN_OR_RETURN(t_->metrics_, Metrics::Create(mo));
  // Bound before joining (port 0 in tandem local) and logged in the form
  // `tandem local` reads back, so no one has to guess a free port.
  if (t_->metrics_->port() > 0) {
    LOG(INFO) << "worker " << o_.worker_id << ": metrics port " << t_->metrics_->port();
  }
  return absl::OkStatus();
}

absl::Status Trainer::Impl::InitMetrics(int rank) {
  if (client_metrics_ != nullptr) return absl::OkStatus();  // the first rank labels the job
  Metrics* m = t_->metrics_.get();
  RETURN_IF_ERROR(m->AddConstLabel("rank", absl::StrCat(rank)));
  ASSIGN_OR_RETURN(data::ClientMetrics cm, data::ClientMetrics::Create(m));
  client_metrics_ = std::make_unique<data::ClientMetrics>(cm);
  ASSIGN_OR_RETURN(step_seconds_, m->Histogram("tandem_step_seconds",
                                               "Wall time of one optimizer step.",
                                               Metrics::LatencyBuckets()));
  ASSIGN_OR_RETURN(samples_total_,
                   m->Counter("tandem_samples_total", "Training samples this worker consumed."));
  ASSIGN_OR_RETURN(loss_gauge_, m->Gauge("tandem_loss", "Training loss of the last step."));
  ASSIGN_OR_RETURN(allreduce_seconds_,
                   m->Counter("tandem_allreduce_seconds_total",
                              "Seconds the gradient-sync thread spent in collectives.",
                              {{"strategy", "allreduce"}}));
  ASSIGN_OR_RETURN(allreduce_bytes_,
                   m->Counter("tandem_allreduce_bytes_total",
                              "Gradient bytes handed to the communicator.",
                              {{"strategy", "allreduce"}}));
  ASSIGN_OR_RETURN(buckets_, m->Gauge("tandem_buckets", "Gradient buckets per step."));
  ASSIGN_OR_RETURN(generation_gauge_,
                   m->Gauge("tandem_generation", "Generation this worker trains in."));
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Impl::Run() {
  ASSIGN_OR_RETURN(spec_, nn::ParseModelSpec(o_.model));
  fingerprint_ = checkpoint::ModelFingerprint(
      absl::StrCat(spec_.ToString(), "\n", t_->model_->layout().DebugString()));
  RETURN_IF_ERROR(StartMetrics());
  RETURN_IF_ERROR(LookUpDatasets());
  CoordinatorClientOptions co;
  co.target = o_.coordinator;
  co.job_id = o_.job_id;
  co.worker_id = o_.worker_id;
  co.endpoint.set_host(o_.hostname);
  co.endpoint.set_metrics_port(std::max(t_->metrics_->port(), 0));
  co.node = o_.hostname;
  co.join_attempts = o_.connect_attempts;
  ASSIGN_OR_RETURN(client_, CoordinatorClient::Create(co));

  while (true) {
    if (result_.generations >= o_.max_rejoins) {
      return absl::AbortedError(absl::StrCat("gave up after ", result_.generations,
                                             " generations; last failure: ", failure_));
    }
    Generation g;
    absl::StatusOr<v1::JoinResponse> join =
        client_->Join(result_.generations == 0 ? o_.join_timeout : o_.rejoin_timeout);
    if (!join.ok()) {
      if (!failure_.empty()) {
        return absl::Status(join.status().code(),
                            absl::StrCat(failure_, "; re-joining failed: ",
                                         join.status().message()));
      }
      return join.status();
    }
    g.join = *join;
    ++result_.generations;
    RETURN_IF_ERROR(InitMetrics(g.join.rank()));
    generation_gauge_->Set(static_cast<double>(g.join.generation()));
    absl::StatusOr<Outcome> outcome = RunGeneration(g);
    if (!outcome.ok()) {
      if (!Recoverable(outcome.status())) {
        (void)client_->Leave(false);
        return outcome.status();
      }
      ReportFailure(g, "training step", outcome.status());
      continue;
    }
    switch (*outcome) {
      case Outcome::kRejoin:
        continue;
      case Outcome::kStopped:
        result_.stopped = true;
        RETURN_IF_ERROR(client_->Leave(/*finished=*/false));
        return result_;
      case Outcome::kDone:
        RETURN_IF_ERROR(client_->Leave(/*finished=*/true));
        return result_;
    }
  }
}

void Trainer::Impl::ReportFailure(Generation& g, const std::string& op, const absl::Status& s) {
  // A collective fails on the survivors at once when a peer dies, before
  // the coordinator notices the silence. Give its liveness check a chance
  // first (heartbeat_misses + 1 periods): its reason names the lost rank
  // ("rank 2 (w2) missed 3 heartbeats"), which a Gloo error cannot. If the
  // generation is still running after that (a hung peer, a network error),
  // end it with a report.
  const absl::Duration period = absl::Milliseconds(std::max(1, g.join.heartbeat_period_ms()));
  const absl::Time deadline = absl::Now() + period * (std::max(1, g.join.heartbeat_misses()) + 1);
  while (client_->command().kind == Command::kContinue && absl::Now() < deadline) {
    absl::SleepFor(std::min(period / 4, absl::Milliseconds(100)));
  }
  Command c = client_->command();
  if (c.kind == Command::kContinue) {
    (void)client_->ReportFailure(op, -1, std::string(s.message()));
    (void)client_->HeartbeatOnce();
    c = client_->command();
  }
  failure_ = absl::StrCat("generation ", g.join.generation(), ", rank ", g.join.rank(), ": ",
                          op, " failed: ", s.message());
  if (!c.reason.empty()) absl::StrAppend(&failure_, " (coordinator: ", c.reason, ")");
  LOG(WARNING) << "worker " << o_.worker_id << ": " << failure_ << "; re-joining";
}

absl::Status Trainer::Impl::SetUp(Generation& g) {
  const int rank = g.join.rank(), world = g.join.world_size();
  CoordinatorStoreOptions so;
  so.channel = client_->channel();
  so.job_id = o_.job_id;
  so.generation = g.join.generation();
  so.default_wait = o_.collective_timeout;
  ASSIGN_OR_RETURN(g.store, CoordinatorStore::Create(so));
  const bool all_local = g.join.local_world_size() == world;
  if (o_.transport == "shm" && !all_local) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--transport=shm needs every rank on this node, but generation ", g.join.generation(),
        " has ", g.join.local_world_size(), " of ", world,
        " ranks here: use --transport=auto or gloo"));
  }
  // Device backends: the gradient mesh is NCCL over device memory (below);
  // the ctl mesh stays on host memory (Gloo / shm).
  const bool device = on_device();
  if (o_.transport == "gloo" || !all_local) {
    GlooOptions go;
    go.rank = rank;
    go.world_size = world;
    go.store = g.store.get();
    go.hostname = o_.hostname;
    go.timeout = o_.collective_timeout;
    go.prefix = absl::StrCat("gen", g.join.generation(), "/grad");
    if (!device) {
      ASSIGN_OR_RETURN(g.grad_comm, GlooCommunicator::Create(go));
    }
    go.prefix = absl::StrCat("gen", g.join.generation(), "/ctl");
    ASSIGN_OR_RETURN(g.ctl_comm, GlooCommunicator::Create(go));
  } else {
    // Segment names carry the job and generation (ShmOptions::prefix), so
    // concurrent jobs and successive generations never meet.
    ShmOptions so3;
    so3.rank = rank;
    so3.world_size = world;
    so3.store = g.store.get();
    so3.timeout = o_.collective_timeout;
    so3.prefix = absl::StrCat(o_.job_id, "/gen", g.join.generation(), "/grad");
    if (!device) {
      ASSIGN_OR_RETURN(g.grad_comm, ShmCommunicator::Create(so3));
    }
    // The ctl mesh carries a few floats per step and the state broadcast
    // once per generation: small staging slots are enough.
    so3.prefix = absl::StrCat(o_.job_id, "/gen", g.join.generation(), "/ctl");
    so3.chunk_bytes = int64_t{256} << 10;
    ASSIGN_OR_RETURN(g.ctl_comm, ShmCommunicator::Create(so3));
  }
  if (device) {
#ifdef TANDEM_WITH_CUDA
    auto* cb = dynamic_cast<cuda::CudaBackend*>(t_->backend_.get());
    if (cb == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "--backend=", o_.backend, " (", t_->backend_->name(),
          "): only the CUDA backend has a device gradient path"));
    }
    CoordinatorStore* store = g.store.get();
    NcclOptions no;
    no.rank = rank;
    no.world_size = world;
    no.device = o_.cuda_device;
    no.prefix = absl::StrCat("gen", g.join.generation(), "/grad");
    no.timeout = o_.collective_timeout;
    no.wait_stream = cb->stream();
    // The coordinator store is a gloo Store (throws); NcclKv wants Statuses.
    no.kv.put = [store](const std::string& key, const std::string& value) -> absl::Status {
      try {
        store->set(key, std::vector<char>(value.begin(), value.end()));
      } catch (const std::exception& e) {
        return absl::UnavailableError(absl::StrCat("coordinator KvSet ", key, ": ", e.what()));
      }
      return absl::OkStatus();
    };
    no.kv.get = [store](const std::string& key,
                        absl::Duration timeout) -> absl::StatusOr<std::string> {
      try {
        store->wait({key}, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
        std::vector<char> v = store->get(key);
        return std::string(v.begin(), v.end());
      } catch (const std::exception& e) {
        return absl::DeadlineExceededError(
            absl::StrCat("coordinator KvGet ", key, ": ", e.what()));
      }
    };
    ASSIGN_OR_RETURN(g.grad_comm, NcclCommunicator::Create(no));
#else
    return absl::UnimplementedError(absl::StrCat(
        "--backend=", o_.backend, ": this worker was built without CUDA, so it has no NCCL "
        "gradient path for device memory; use --backend=cpu"));
#endif
  }
  result_.transport = g.grad_comm->backend();
  if (rank == 0) {
    LOG(INFO) << "generation " << g.join.generation() << ": " << world << " rank(s), "
              << g.grad_comm->backend() << " transport";
  }

  tensor::FlatStorage& storage = t_->model_->storage();
  std::unique_ptr<optim::Optimizer> optimizer;
  const optim::ParamRange range{0, storage.size()};
  if (o_.optimizer == "adamw") {
    optim::AdamWOptions ao;
    ao.weight_decay = static_cast<float>(o_.weight_decay);
    ASSIGN_OR_RETURN(optimizer, optim::AdamW::Create(range, ao));
  } else {
    optim::SgdOptions so2;
    so2.momentum = static_cast<float>(o_.momentum);
    so2.nesterov = o_.nesterov;
    so2.weight_decay = static_cast<float>(o_.weight_decay);
    ASSIGN_OR_RETURN(optimizer, optim::Sgd::Create(range, so2));
  }
  g.optimizer = optimizer.get();
  RETURN_IF_ERROR(RestoreState(g));
#ifdef TANDEM_WITH_CUDA
  if (device) {
    auto* cb = static_cast<cuda::CudaBackend*>(t_->backend_.get());  // checked above
    ASSIGN_OR_RETURN(std::unique_ptr<sync::CudaDeviceStepper> stepper,
                     sync::CudaDeviceStepper::Create(cb, g.optimizer));
    RETURN_IF_ERROR(stepper->LoadState());  // restored (or zero) state -> device
    g.stepper = std::move(stepper);
  }
#endif

  sync::AllreduceSyncOptions ao;
  ao.comm = g.grad_comm.get();
  ao.params = storage.params();
  ao.grads = storage.grads();
  ao.size = storage.size();
  for (const nn::GradRange& r : nn::GroupRanges(t_->model_->layout())) {
    ao.ready_ranges.push_back({r.lo, r.hi});
  }
  ao.bucket_cap_mb = o_.bucket_cap_mb;
  ao.optimizer = std::move(optimizer);
  ao.max_grad_norm = o_.max_grad_norm;
  ao.device_stepper = g.stepper.get();
  ASSIGN_OR_RETURN(g.sync, sync::CreateAllreduceSync(std::move(ao)));
  return absl::OkStatus();
}

// Rank 0 decides the state (the committed checkpoint, or the seeded
// initialisation when there is none) and broadcasts it: parameters,
// optimizer state, step and cursor. Ranks that diverged in a failed step
// are made identical again, and only rank 0 needs to read the file.
absl::Status Trainer::Impl::RestoreState(Generation& g) {
  tensor::FlatStorage& storage = t_->model_->storage();
  // header: ok, step, epoch, samples_in_epoch
  int64_t header[4] = {1, 0, 0, 0};
  absl::Status load;
  const std::string& path = g.join.resume_from().path();
  if (g.join.rank() == 0) {
    if (path.empty()) {
      load = t_->model_->Initialize(o_.seed);
    } else {
      checkpoint::ReadOptions ro;
      ro.expected_model_fingerprint = fingerprint_;
      absl::StatusOr<checkpoint::Checkpoint> c = checkpoint::ReadCheckpoint(path, ro);
      if (!c.ok()) {
        load = c.status();
      } else if (c->total_params != storage.size() || c->range_lo != 0 ||
                 c->range_hi != storage.size()) {
        load = absl::FailedPreconditionError(
            absl::StrCat(path, " holds a range of another size than this model's"));
      } else {
        load = t_->backend_->CopyToDevice(storage.params(), c->params.data(),
                                          c->params.size() * sizeof(float));
        if (load.ok()) load = checkpoint::RestoreOptimizerState(*c, g.optimizer);
        const std::string* cursor = c->FindBlob("data_cursor");
        v1::DataCursor dc;
        if (load.ok() && (cursor == nullptr || !dc.ParseFromString(*cursor))) {
          load = absl::DataLossError(absl::StrCat(path, " has no readable data cursor"));
        }
        header[1] = c->step;
        header[2] = dc.epoch();
        header[3] = dc.samples_in_epoch();
      }
    }
    if (!load.ok()) {
      header[0] = 0;
      load = Annotate(load, absl::StrCat("rank 0 could not restore ",
                                         path.empty() ? "the initial state" : path));
    }
  }
  RETURN_IF_ERROR(g.ctl_comm->Broadcast(header, sizeof(header), 0));
  if (header[0] == 0) {
    if (!load.ok()) return absl::InternalError(std::string(load.message()));
    return absl::InternalError("rank 0 could not restore the last checkpoint (see its log)");
  }
  // Broadcast host-side over the ctl mesh: device parameters are staged
  // through host_params_.
  if (on_device()) {
    ASSIGN_OR_RETURN(float* host, HostParams());
    RETURN_IF_ERROR(g.ctl_comm->Broadcast(host, storage.size() * sizeof(float), 0));
    RETURN_IF_ERROR(t_->backend_->CopyToDevice(storage.params(), host,
                                               storage.size() * sizeof(float)));
  } else {
    RETURN_IF_ERROR(g.ctl_comm->Broadcast(storage.params(), storage.size() * sizeof(float), 0));
  }
  for (optim::StateBuffer& b : g.optimizer->state()) {
    if (path.empty()) {
      std::fill(b.data.begin(), b.data.end(), 0.f);
    } else {
      RETURN_IF_ERROR(g.ctl_comm->Broadcast(b.data.data(), b.data.size() * sizeof(float), 0));
    }
  }
  step_ = header[1];
  cursor_ = data::Cursor{header[2], 0};
  samples_in_epoch_ = header[3];
  if (!path.empty()) checkpoint_step_ = step_;
  if (g.join.rank() == 0 && !path.empty()) {
    Print(absl::StrCat("resumed from ", path, " at step ", step_, " (epoch ", cursor_.epoch + 1,
                       ", sample ", samples_in_epoch_, ") in generation ",
                       g.join.generation(), " with ", g.join.world_size(), " worker(s)"));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Impl::WriteCheckpoint(Generation& g) {
  if (o_.checkpoint_dir.empty() || g.join.rank() != 0) return absl::OkStatus();
  if (step_ == checkpoint_step_) return absl::OkStatus();  // already on disk
  tensor::FlatStorage& storage = t_->model_->storage();
  RETURN_IF_ERROR(MakeDirectories(o_.checkpoint_dir));
  const std::string path =
      absl::StrFormat("%s/step-%08d.tckpt", o_.checkpoint_dir, static_cast<long long>(step_));
  v1::DataCursor dc;
  dc.set_epoch(cursor_.epoch);
  dc.set_step_in_epoch(cursor_.step_in_epoch);
  dc.set_samples_in_epoch(cursor_.step_in_epoch * int64_t{o_.batch_size} *
                          g.join.world_size());
  const std::string cursor_bytes = dc.SerializeAsString();
  checkpoint::CheckpointView v;
  v.model_fingerprint = fingerprint_;
  v.step = step_;
  v.total_params = storage.size();
  v.range_lo = 0;
  v.range_hi = storage.size();
  const float* params = storage.params();
  if (on_device()) {
    ASSIGN_OR_RETURN(params, HostParams());
    RETURN_IF_ERROR(SaveDeviceState(g));
  }
  v.params = absl::MakeConstSpan(params, storage.size());
  checkpoint::AddOptimizerState(*g.optimizer, &v);
  v.blobs.push_back({"data_cursor", cursor_bytes});
  v.blobs.push_back({"model_spec", o_.model});
  RETURN_IF_ERROR(checkpoint::WriteCheckpoint(path, v));
  v1::CheckpointRecord record;
  record.set_step(step_);
  record.set_path(path);
  *record.mutable_cursor() = dc;
  record.set_world_size(g.join.world_size());
  record.set_unix_millis(absl::ToUnixMillis(absl::Now()));
  RETURN_IF_ERROR(client_->CommitCheckpoint(record));
  result_.last_checkpoint = path;
  checkpoint_step_ = step_;
  return absl::OkStatus();
}

absl::Status Trainer::Impl::ToModelBatch(const data::HostBatch& hb, nn::Batch* out) {
  if (hb.feature_dtype != v1::DTYPE_F32 || hb.label_dtype != v1::DTYPE_I32) {
    return absl::InvalidArgumentError("data server sent a batch that is not f32 features and "
                                      "int32 labels");
  }
  const int n = static_cast<int>(hb.size());
  if (static_cast<int64_t>(hb.features.size()) != n * feature_width_ * 4 ||
      static_cast<int64_t>(hb.labels.size()) != int64_t{n} * 4) {
    return absl::DataLossError(absl::StrCat("batch of ", n, " samples has ", hb.features.size(),
                                            " feature bytes and ", hb.labels.size(),
                                            " label bytes"));
  }
  out->size = n;
  if (on_device()) {
    // Copied into device buffers sized once for batch_size.
    if (n > o_.batch_size) {
      return absl::InternalError(absl::StrCat("batch of ", n, " samples exceeds --batch_size"));
    }
    kernels::Backend& b = *t_->backend_;
    if (device_features_ == nullptr) {
      ASSIGN_OR_RETURN(void* f, b.AllocateRaw(int64_t{o_.batch_size} * feature_width_ * 4));
      device_features_ = static_cast<float*>(f);
      ASSIGN_OR_RETURN(void* l, b.AllocateRaw(int64_t{o_.batch_size} * 4));
      device_labels_ = static_cast<int32_t*>(l);
    }
    RETURN_IF_ERROR(b.CopyToDevice(device_features_, hb.features.data(), hb.features.size()));
    RETURN_IF_ERROR(b.CopyToDevice(device_labels_, hb.labels.data(), hb.labels.size()));
    out->features = device_features_;
    out->labels = device_labels_;
    return absl::OkStatus();
  }
  // Host-accessible backend: the prefetch buffers feed the model directly.
  out->features = reinterpret_cast<const float*>(hb.features.data());
  out->labels = reinterpret_cast<const int32_t*>(hb.labels.data());
  return absl::OkStatus();
}

absl::StatusOr<float*> Trainer::Impl::HostParams() {
  tensor::FlatStorage& storage = t_->model_->storage();
  host_params_.resize(storage.size());
  RETURN_IF_ERROR(t_->backend_->CopyToHost(host_params_.data(), storage.params(),
                                           storage.size() * sizeof(float)));
  return host_params_.data();
}

absl::Status Trainer::Impl::SaveDeviceState(Generation& g) {
#ifdef TANDEM_WITH_CUDA
  if (g.stepper != nullptr) {
    return static_cast<sync::CudaDeviceStepper*>(g.stepper.get())->SaveState();
  }
#endif
  (void)g;
  return absl::OkStatus();
}

absl::StatusOr<float> Trainer::Impl::ReadLoss() {
  float loss = 0;
  RETURN_IF_ERROR(t_->backend_->CopyToHost(&loss, t_->model_->loss(), sizeof(float)));
  return loss;
}

absl::Status Trainer::Impl::Evaluate(Generation& g) {
  if (o_.eval_dataset.empty() || eval_samples_ == 0) return absl::OkStatus();
  const int world = g.join.world_size();
  data::PrefetchOptions po;
  po.servers = o_.data_servers;
  po.metrics = client_metrics_.get();
  v1::StreamBatchesRequest& r = po.request;
  r.set_dataset(o_.eval_dataset);
  r.set_global_batch_size(int64_t{o_.batch_size} * world);
  r.set_rank(g.join.rank());
  r.set_world_size(world);
  r.set_remainder(v1::SHORT_LAST);
  r.set_shuffle(false);
  r.set_normalize_to_f32(true);
  const int64_t gb = r.global_batch_size();
  r.set_max_batches((eval_samples_ + gb - 1) / gb);
  ASSIGN_OR_RETURN(std::unique_ptr<data::PrefetchClient> client, data::PrefetchClient::Start(po));
  const int classes = t_->model_->num_classes();
  predictions_.resize(o_.batch_size);
  std::vector<int32_t> labels(o_.batch_size);
  float counts[2] = {0, 0};  // correct, seen
  for (int64_t b = 0; b < r.max_batches(); ++b) {
    ASSIGN_OR_RETURN(const data::HostBatch* hb, client->Next());
    if (hb->size() == 0) continue;
    nn::Batch batch;
    RETURN_IF_ERROR(ToModelBatch(*hb, &batch));
    RETURN_IF_ERROR(t_->model_->Forward(batch));
    if (on_device()) {
      if (device_predictions_ == nullptr) {
        ASSIGN_OR_RETURN(void* p, t_->backend_->AllocateRaw(int64_t{o_.batch_size} * 4));
        device_predictions_ = static_cast<int32_t*>(p);
      }
      t_->backend_->ArgmaxRows(batch.size, classes, t_->model_->probs(), device_predictions_);
      RETURN_IF_ERROR(t_->backend_->CopyToHost(predictions_.data(), device_predictions_,
                                               batch.size * sizeof(int32_t)));
    } else {
      t_->backend_->ArgmaxRows(batch.size, classes, t_->model_->probs(), predictions_.data());
    }
    std::memcpy(labels.data(), hb->labels.data(), batch.size * sizeof(int32_t));
    for (int i = 0; i < batch.size; ++i) counts[0] += predictions_[i] == labels[i] ? 1.f : 0.f;
    counts[1] += static_cast<float>(batch.size);
  }
  RETURN_IF_ERROR(g.ctl_comm->AllReduce(counts, 2, ReduceOp::kSum));
  result_.test_accuracy = counts[1] > 0 ? counts[0] / counts[1] : 0;
  if (g.join.rank() == 0) {
    // The epoch that just ended: the cursor already points into the next.
    Print(absl::StrFormat("epoch %d test accuracy %.4f (%d samples)",
                          static_cast<int>(cursor_.epoch), result_.test_accuracy,
                          static_cast<int>(counts[1])));
  }
  return absl::OkStatus();
}

absl::StatusOr<Trainer::Impl::Outcome> Trainer::Impl::RunGeneration(Generation& g) {
  RETURN_IF_ERROR(SetUp(g));
  const int rank = g.join.rank(), world = g.join.world_size();
  const int k = o_.accumulation;
  const int64_t global_batch = int64_t{o_.batch_size} * world;
  data::SamplerConfig sc;
  sc.num_samples = train_samples_;
  sc.global_batch_size = global_batch;
  sc.world_size = world;
  sc.remainder = data::Remainder::kDrop;
  if (global_batch > train_samples_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", global_batch, " (", o_.batch_size, " x ", world,
        " workers) exceeds the dataset's ", train_samples_, " samples: lower --batch_size"));
  }
  const int64_t per_epoch = data::StepsPerEpoch(sc);
  // The restored position in samples, cut into this world's global batches
  // (a different world size re-trains at most one partial batch).
  cursor_.step_in_epoch = samples_in_epoch_ / global_batch;
  if (cursor_.step_in_epoch >= per_epoch) cursor_ = data::Cursor{cursor_.epoch + 1, 0};
  // Batches left until the end of the last epoch; the run ends with the last
  // whole optimizer step.
  const int64_t batches_left =
      std::max<int64_t>(0, (o_.epochs - cursor_.epoch) * per_epoch - cursor_.step_in_epoch);
  int64_t total_steps = step_ + batches_left / k;
  if (o_.max_steps > 0) total_steps = std::min(total_steps, o_.max_steps);
  const int64_t steps_left = std::max<int64_t>(0, total_steps - step_);

  ASSIGN_OR_RETURN(optim::ScalingRule rule, optim::ParseScalingRule(o_.lr_scaling));
  ASSIGN_OR_RETURN(double base_lr, optim::ScaleLearningRate(o_.lr, world, rule));
  optim::LrScheduleOptions lo;
  ASSIGN_OR_RETURN(lo.kind, optim::ParseScheduleKind(o_.schedule));
  lo.base_lr = base_lr;
  lo.total_steps = std::max<int64_t>(total_steps, 1);
  lo.warmup_steps = std::min(o_.warmup_steps, lo.kind == optim::ScheduleKind::kConstant
                                                  ? o_.warmup_steps
                                                  : lo.total_steps - 1);
  if (lo.kind != optim::ScheduleKind::kConstant && lo.total_steps <= lo.warmup_steps) {
    lo.kind = optim::ScheduleKind::kConstant;  // a run of one step has nothing to decay
  }
  ASSIGN_OR_RETURN(optim::LrSchedule schedule, optim::LrSchedule::Create(lo));

  if (steps_left > 0) {
    data::PrefetchOptions po;
    po.servers = o_.data_servers;
    po.metrics = client_metrics_.get();
    v1::StreamBatchesRequest& r = po.request;
    r.set_dataset(o_.dataset);
    r.set_seed(o_.seed);
    r.set_global_batch_size(global_batch);
    r.set_rank(rank);
    r.set_world_size(world);
    r.set_epoch(cursor_.epoch);
    r.set_step_in_epoch(cursor_.step_in_epoch);
    r.set_max_batches(steps_left * k);
    r.set_remainder(v1::DROP);
    r.set_shuffle(true);
    r.set_normalize_to_f32(true);
    ASSIGN_OR_RETURN(g.data, data::PrefetchClient::Start(po));
  }

  // Progress window.
  absl::Time window_start = absl::Now();
  absl::Duration window_wait = g.data ? g.data->wait_time() : absl::ZeroDuration();
  int64_t window_steps = 0;
  double window_loss = 0;
  int64_t window_samples = 0;

  while (step_ < total_steps) {
    const absl::Time step_start = absl::Now();
    bool epoch_ended = false;
    float loss_sum = 0;
    int64_t samples = 0;
    for (int m = 0; m < k; ++m) {
      ASSIGN_OR_RETURN(const data::HostBatch* hb, g.data->Next());
      epoch_ended |= hb->last_in_epoch;
      nn::Batch batch;
      RETURN_IF_ERROR(ToModelBatch(*hb, &batch));
      RETURN_IF_ERROR(t_->model_->Forward(batch));
      const float beta = m == 0 ? 0.f : 1.f;
      if (m + 1 < k) {
        RETURN_IF_ERROR(t_->model_->Backward(beta, nullptr));
      } else {
        sync::StepOptions so;
        so.grad_scale = 1.f / static_cast<float>(k);
        RETURN_IF_ERROR(g.sync->BeginStep(so));
        sync::GradientSync* s = g.sync.get();
        RETURN_IF_ERROR(t_->model_->Backward(
            beta, [s](const nn::GradRange& r) { s->OnGradientsReady(r.lo, r.hi); }));
      }
      ASSIGN_OR_RETURN(float loss, ReadLoss());
      loss_sum += loss;
      samples += batch.size;
    }
    optim::StepContext ctx;
    ctx.step = step_ + 1;
    ctx.lr = schedule.LearningRate(ctx.step);
    RETURN_IF_ERROR(g.sync->FinishStep(ctx));
    ++step_;
    cursor_ = g.data->cursor();
    samples_in_epoch_ = cursor_.step_in_epoch * global_batch;

    // Agree on the coordinator's command: every rank acts at the same step.
    const Command c = client_->command();
    float flags[3] = {c.kind == Command::kStop ? 1.f : 0.f,
                      c.kind == Command::kRejoin ? 1.f : 0.f,
                      c.kind == Command::kCoordinatorLost ? 1.f : 0.f};
    RETURN_IF_ERROR(g.ctl_comm->AllReduce(flags, 3, ReduceOp::kMax));

    const double step_seconds = absl::ToDoubleSeconds(absl::Now() - step_start);
    const float loss = loss_sum / static_cast<float>(k);
    step_seconds_->Observe(step_seconds);
    samples_total_->Increment(static_cast<double>(samples));
    loss_gauge_->Set(loss);
    const sync::SyncStats st = g.sync->stats();
    allreduce_seconds_->Increment(std::max(0.0, st.comm_seconds - g.last_stats.comm_seconds));
    allreduce_bytes_->Increment(
        static_cast<double>(std::max<int64_t>(0, st.bytes_sent - g.last_stats.bytes_sent)));
    if (st.steps > g.last_stats.steps) {
      buckets_->Set(static_cast<double>(st.buckets - g.last_stats.buckets) /
                    static_cast<double>(st.steps - g.last_stats.steps));
    }
    g.last_stats = st;
    ++window_steps;
    window_loss += loss;
    window_samples += samples * world;

    const bool log_now = o_.log_every > 0 && step_ % o_.log_every == 0;
    if (log_now || step_ == total_steps) {
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - window_start);
      const double wait = absl::ToDoubleSeconds(g.data->wait_time() - window_wait);
      const double ms = elapsed / window_steps * 1e3;
      v1::WorkerProgress p;
      p.set_step(step_);
      p.set_epoch(cursor_.epoch);
      p.set_samples_seen(cursor_.step_in_epoch * global_batch);
      p.set_loss(window_loss / window_steps);
      p.set_step_seconds(elapsed / window_steps);
      p.set_data_wait_seconds(wait / window_steps);
      p.set_samples_per_second(elapsed > 0 ? window_samples / elapsed : 0);
      client_->SetProgress(p);
      if (rank == 0 && o_.log_every > 0) {
        // The epoch the step trained in (1-based).
        const int64_t epoch =
            cursor_.step_in_epoch == 0 ? cursor_.epoch : cursor_.epoch + 1;
        Print(absl::StrFormat(
            "step %d/%d epoch %d loss %.4f lr %.4f samples/s %.0f ms/step %.1f data-wait %.1f%% "
            "world %d eta %s",
            static_cast<long long>(step_), static_cast<long long>(total_steps),
            static_cast<long long>(epoch), window_loss / window_steps, ctx.lr,
            p.samples_per_second(), ms, elapsed > 0 ? 100.0 * wait / elapsed : 0.0, world,
            FormatEta(ms / 1e3 * static_cast<double>(total_steps - step_))));
      }
      window_start = absl::Now();
      window_wait = g.data->wait_time();
      window_steps = 0;
      window_loss = 0;
      window_samples = 0;
    }

    if (flags[2] > 0) {
      return absl::UnavailableError(absl::StrCat("lost the coordinator: ", c.reason));
    }
    if (flags[1] > 0) {
          failure_ = absl::StrCat("generation ", g.join.generation(), " ended",
                              c.reason.empty() ? "" : ": ", c.reason);
      if (rank == 0) {
        Print(absl::StrCat("generation ", g.join.generation(), " ended",
                           c.reason.empty() ? "" : " (", c.reason, c.reason.empty() ? "" : ")",
                           "; re-joining and resuming from the last checkpoint"));
      }
      return Outcome::kRejoin;
    }
    if (flags[0] > 0) {
      RETURN_IF_ERROR(WriteCheckpoint(g));
      if (rank == 0) Print(absl::StrCat("stopping at step ", step_, ": ", c.reason));
      result_.steps = step_;
      result_.cursor = cursor_;
      return Outcome::kStopped;
    }
    const absl::Time aside = absl::Now();
    if (epoch_ended) RETURN_IF_ERROR(Evaluate(g));
    if (o_.checkpoint_every > 0 && step_ % o_.checkpoint_every == 0 && step_ < total_steps) {
      RETURN_IF_ERROR(WriteCheckpoint(g));
    }
    window_start += absl::Now() - aside;  // ms/step and samples/s count training only
  }
  RETURN_IF_ERROR(WriteCheckpoint(g));
  result_.steps = step_;
  result_.cursor = cursor_;
  return Outcome::kDone;
}

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) {}
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(TrainerOptions options) {
  RETURN_IF_ERROR(ValidateTrainerOptions(options));
  std::unique_ptr<Trainer> t(new Trainer(std::move(options)));
  kernels::BackendOptions bo;
  bo.device = t->options_.backend;
  bo.cuda_device = t->options_.cuda_device;
  ASSIGN_OR_RETURN(t->backend_, kernels::CreateBackend(bo));
  if (!t->backend_->host_accessible()) {
#ifdef TANDEM_WITH_CUDA
    const bool supported = dynamic_cast<cuda::CudaBackend*>(t->backend_.get()) != nullptr;
#else
    const bool supported = false;
#endif
    if (!supported) {
      // Gloo / shm reduce host memory; device memory needs NCCL (CUDA builds).
      return absl::UnimplementedError(absl::StrCat(
          "--backend=", t->options_.backend, " gave the device backend '",
          t->backend_->name(), "', but this worker has no gradient path for its memory "
          "(NCCL needs the CUDA backend and a build with CUDA); use --backend=cpu"));
    }
  }
  nn::ModelOptions mo;
  mo.max_batch = t->options_.batch_size;
  mo.seed = t->options_.seed;
  ASSIGN_OR_RETURN(t->model_, nn::CreateModel(t->options_.model, t->backend_.get(), mo));
  t->impl_ = std::make_unique<Impl>(t.get());
  return t;
}

absl::StatusOr<TrainResult> Trainer::Run() { return impl_->Run(); }

}  // namespace worker
}  // namespace tandem
