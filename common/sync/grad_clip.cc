#include "common/sync/grad_clip.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {

GradClip::GradClip(double max_grad_norm, Communicator* shards)
    : max_grad_norm_(max_grad_norm), shards_(shards) {
  if (shards_ != nullptr) gathered_.assign(2 * shards_->world_size(), 0.0);
}

absl::StatusOr<GradClip> GradClip::Create(GradClipOptions options) {
  if (!(options.max_grad_norm >= 0) || !std::isfinite(options.max_grad_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_grad_norm must be >= 0 (0 = no clipping), got ", options.max_grad_norm));
  }
  return GradClip(options.max_grad_norm, options.shards);
}

absl::StatusOr<GradClip::Totals> GradClip::Combine(double local_sum_sq, double tag) {
  Totals t{local_sum_sq, tag};
  if (shards_ == nullptr || gathered_.size() <= 2) return t;
  const double mine[2] = {local_sum_sq, tag};
  absl::Status s = shards_->AllGather(mine, gathered_.data(), sizeof(mine));
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("gradient norm allgather across ", gathered_.size() / 2,
                                     " shards on rank ", shards_->rank(), ": ", s.message()));
  }
  t.sum_sq = 0;
  for (size_t r = 0; r < gathered_.size(); r += 2) {
    t.sum_sq += gathered_[r];  // rank order: the same sum on every rank
    t.max_tag = std::max(t.max_tag, gathered_[r + 1]);
  }
  return t;
}

absl::StatusOr<optim::ClipResult> GradClip::ClipFromTotal(double total_sum_sq,
                                                          double scale) const {
  if (!enabled()) return optim::ClipResult{};
  return optim::ComputeClip(total_sum_sq * scale * scale, max_grad_norm_);
}

absl::StatusOr<optim::ClipResult> GradClip::Compute(double local_sum_sq, double scale) {
  if (!enabled()) return optim::ClipResult{};
  ASSIGN_OR_RETURN(Totals t, Combine(local_sum_sq, -1));
  return ClipFromTotal(t.sum_sq, scale);
}

}  // namespace sync
}  // namespace tandem
