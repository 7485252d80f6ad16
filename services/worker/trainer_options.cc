#include "services/worker/trainer_options.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/nn/model_spec.h"
#include "common/optim/schedule.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

bool StrategyAppliesMomentum(const TrainerOptions& o) {
  absl::StatusOr<sync::StrategyInfo> info = sync::FindStrategy(o.sync.strategy);
  if (!info.ok() || !sync::TakesMomentum(*info, o.sync)) return false;
  // A codec's default (compressed topk / threshold) gives way to an
  // optimizer with momentum of its own; the strategy sees that optimizer
  // and turns the correction off. Asked for by name, it must fit.
  const bool asked = o.sync.opts.count("momentum_correction") != 0;
  return asked || (o.optimizer == "sgd" && !o.nesterov);
}

absl::Status CheckStrategyMomentum(const TrainerOptions& o) {
  if (!StrategyAppliesMomentum(o)) return absl::OkStatus();
  if (o.optimizer != "sgd") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync ", o.sync.strategy, " with momentum_correction=1 applies the SGD momentum in the "
        "strategy and needs --optimizer sgd, got --optimizer ", o.optimizer,
        ": use --optimizer sgd or drop momentum_correction"));
  }
  if (o.nesterov) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync ", o.sync.strategy, " with momentum_correction=1 applies plain (heavy-ball) "
        "momentum in the strategy: --nesterov is not supported; drop --nesterov or "
        "momentum_correction"));
  }
  return absl::OkStatus();
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
  if (o.lr_reference_batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lr_reference_batch must be 0 (one worker's batch) or the global batch --lr was tuned "
        "for, got ", o.lr_reference_batch));
  }
  RETURN_IF_ERROR(Annotate(optim::ParseScheduleKind(o.schedule).status(), "--schedule"));
  if (o.warmup_steps < 0) return bad("--warmup_steps must be >= 0");
  if (o.momentum < 0 || o.momentum >= 1) return bad("--momentum must be in [0, 1)");
  if (o.nesterov && o.momentum == 0) return bad("--nesterov needs --momentum > 0");
  if (o.weight_decay < 0) return bad("--weight_decay must be >= 0");
  if (!(o.sync.bucket_cap_mb > 0)) return bad("--bucket_cap_mb must be > 0");
  if (o.sync.max_grad_norm < 0) return bad("--max_grad_norm must be >= 0");
  RETURN_IF_ERROR(sync::ValidateSyncOptions(o.sync));
  RETURN_IF_ERROR(CheckStrategyMomentum(o));
  if (o.checkpoint_every < 0) return bad("--checkpoint_every must be >= 0");
  if (o.debug_extra_compute < absl::ZeroDuration() || o.debug_extra_data < absl::ZeroDuration() ||
      o.debug_extra_compute > absl::Minutes(1) || o.debug_extra_data > absl::Minutes(1)) {
    return bad("--debug_extra_compute_ms and --debug_extra_data_ms must be in [0, 60000]");
  }
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
  if (o.replica_every < 0) {
    return bad(absl::StrCat("--replica_every must be >= 0 (0 turns peer replicas off), got ",
                            o.replica_every));
  }
  if (o.coordinator_lost_after <= absl::ZeroDuration()) return bad("coordinator_lost_after must be > 0");
  absl::StatusOr<nn::ModelSpec> spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) return Annotate(spec.status(), "--model");
  RETURN_IF_ERROR(nn::CheckModelSupportsStrategy(*spec, o.sync.strategy));
  if (o.torch_threads < 1) return bad("--torch_threads must be >= 1");
  RETURN_IF_ERROR(MakeStepPrecisionOptions(o).status());
  return absl::OkStatus();
}

absl::StatusOr<StepPrecisionOptions> MakeStepPrecisionOptions(const TrainerOptions& o) {
  StepPrecisionOptions p;
  ASSIGN_OR_RETURN(p.precision, ParsePrecision(o.precision));
  p.check_non_finite = o.check_nonfinite;
  p.max_non_finite_steps = o.max_nonfinite_steps;
  p.initial_loss_scale = o.loss_scale;
  p.loss_scale_growth_interval = o.loss_scale_growth_interval;
  if (o.max_nonfinite_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_nonfinite_steps must be >= 1 (skipped steps in a row before the job stops), got ",
        o.max_nonfinite_steps));
  }
  if (!(o.loss_scale >= 1) || !std::isfinite(o.loss_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--loss_scale must be a finite number >= 1, got ", o.loss_scale));
  }
  if (o.loss_scale_growth_interval < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loss_scale_growth_interval must be >= 1, got ", o.loss_scale_growth_interval));
  }
  if (p.precision == Precision::kFp16 && !o.check_nonfinite) {
    return absl::InvalidArgumentError(
        "--precision=fp16 needs --check_nonfinite: dynamic loss scaling skips the steps whose "
        "scaled gradients overflow");
  }
  if (p.precision != Precision::kFp32 && (o.sync.strategy == "ps" || o.sync.strategy == "hybrid")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--precision=", o.precision, " is not supported with --sync ", o.sync.strategy,
        ": the shard servers apply the step and cannot skip an overflowed one; use allreduce, "
        "zero1, zero2 or compressed"));
  }
  for (absl::string_view item : absl::StrSplit(o.inject_nonfinite, ':', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> sr = absl::StrSplit(item, '@');
    int64_t step = 0;
    int rank = -1;
    if (!absl::SimpleAtoi(sr.first, &step) || step < 1 ||
        (!sr.second.empty() && (!absl::SimpleAtoi(sr.second, &rank) || rank < 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--inject_nonfinite: '", item, "' is not STEP or STEP@RANK (step >= 1, rank >= 0)"));
    }
    p.inject_non_finite.push_back({step, rank});
  }
  return p;
}

absl::Status ParseBatchFlags(const std::string& batch, const std::string& schedule,
                             TrainerOptions* o) {
  o->batch_auto = false;
  o->batch_min = o->batch_max = 0;
  o->batch_schedule.clear();
  if (batch == "auto" || absl::StartsWith(batch, "auto:")) {
    o->batch_auto = true;
    o->batch_min = o->batch_size;
    o->batch_max = int64_t{32} * o->batch_size;
    if (batch != "auto") {
      const std::vector<std::string> parts = absl::StrSplit(batch.substr(5), ',');
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &o->batch_min) ||
          !absl::SimpleAtoi(parts[1], &o->batch_max) || o->batch_min < 1 ||
          o->batch_max < o->batch_min) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--batch ", batch, ": expected auto or auto:MIN,MAX with 1 <= MIN <= MAX (global "
            "batch sizes, e.g. auto:64,1024)"));
      }
    }
  } else if (!batch.empty() && batch != "fixed") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch ", batch, ": expected fixed (--batch_size per worker), auto or auto:MIN,MAX"));
  }
  if (schedule.empty()) return absl::OkStatus();
  int64_t last = 0;
  for (absl::string_view item : absl::StrSplit(schedule, ',')) {
    const std::vector<std::string> kv = absl::StrSplit(item, ':');
    int64_t step = 0, size = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &step) || !absl::SimpleAtoi(kv[1], &size) ||
        step < 1 || size < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch_schedule: '", item, "' is not STEP:SIZE (step >= 1, global batch >= 1)"));
    }
    if (step <= last) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batch_schedule: steps must increase, got ", step, " after ", last));
    }
    last = step;
    o->batch_schedule.push_back({step, size});
  }
  return absl::OkStatus();
}

int64_t LocalBatchCapacity(const TrainerOptions& o) {
  int64_t cap = o.batch_size;
  if (o.batch_auto) cap = std::max(cap, o.batch_max);
  for (const auto& [step, size] : o.batch_schedule) cap = std::max(cap, size);
  return cap;
}

int64_t ScheduledGlobalBatch(const TrainerOptions& o, int64_t step) {
  int64_t size = 0;
  for (const auto& [at, s] : o.batch_schedule) {
    if (at <= step) size = s;
  }
  return size;
}

}  // namespace worker
}  // namespace tandem
