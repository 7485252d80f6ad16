#include "common/sync/grad_clip.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {

GradClip::GradClip(double max_grad_norm, Communicator* shards)
    : max_grad_norm_(max_grad_norm), shards_(shards) {
  if (shards_ != nullptr) gathered_.assign(shards_->world_size(), 0.0);
}

absl::StatusOr<GradClip> GradClip::Create(GradClipOptions options) {
  if (!(options.max_grad_norm >= 0) || !std::isfinite(options.max_grad_norm)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_grad_norm must be >= 0 (0 = no clipping), got ", options.max_grad_norm));
  }
  return GradClip(options.max_grad_norm, options.shards);
}

absl::StatusOr<optim::ClipResult> GradClip::Compute(double local_sum_sq, double scale) {
  if (!enabled()) return optim::ClipResult{};
  double total = local_sum_sq;
  if (shards_ != nullptr && gathered_.size() > 1) {
    absl::Status s = shards_->AllGather(&local_sum_sq, gathered_.data(), sizeof(double));
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("gradient norm allgather across ",
                                                 gathered_.size(), " shards on rank ",
                                                 shards_->rank(), ": ", s.message()));
    }
    total = 0;
    for (double g : gathered_) total += g;  // rank order: the same sum on every rank
  }
  return optim::ComputeClip(total * scale * scale, max_grad_norm_);
}

}  // namespace sync
}  // namespace tandem
