#include "services/worker/trainer_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/nn/model_spec.h"
#include "common/optim/schedule.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
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
  if (o.coordinator_lost_after <= absl::ZeroDuration()) return bad("coordinator_lost_after must be > 0");
  absl::StatusOr<nn::ModelSpec> spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) return Annotate(spec.status(), "--model");
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
