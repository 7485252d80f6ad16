#include "services/worker/step_precision.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
namespace {

// "fc1.weight" -> "fc1"; "h0.attn.qkv.weight" -> "h0.attn.qkv".
std::string LayerOf(const std::string& param) {
  const size_t dot = param.rfind('.');
  return dot == std::string::npos ? param : param.substr(0, dot);
}

}  // namespace

absl::StatusOr<Precision> ParsePrecision(absl::string_view text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  return absl::InvalidArgumentError(
      absl::StrCat("--precision must be fp32, bf16 or fp16, got '", text, "'"));
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

StepPrecision::StepPrecision(const StepPrecisionOptions& options, kernels::Backend* backend,
                             nn::Model* model)
    : options_(options), backend_(backend), model_(model) {}

absl::StatusOr<std::unique_ptr<StepPrecision>> StepPrecision::Create(
    const StepPrecisionOptions& options, kernels::Backend* backend, nn::Model* model) {
  if (options.max_non_finite_steps < 1 ||
      (options.precision == Precision::kFp16 && !options.check_non_finite)) {
    return absl::InvalidArgumentError(
        "StepPrecision: max_non_finite_steps must be >= 1 and fp16 needs check_non_finite "
        "(MakeStepPrecisionOptions checks the flags)");
  }
  std::unique_ptr<StepPrecision> p(new StepPrecision(options, backend, model));
  if (options.precision == Precision::kFp16) {
    optim::LossScalerOptions lo;
    lo.initial_scale = options.initial_loss_scale;
    lo.growth_interval = options.loss_scale_growth_interval;
    lo.max_scale = std::max(lo.max_scale, lo.initial_scale);
    // The job's own limit (AfterStep) says which layer; the scaler's would not.
    lo.max_consecutive_skips = 0;
    absl::StatusOr<optim::DynamicLossScaler> s = optim::DynamicLossScaler::Create(lo);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--loss_scale: ", s.status().message()));
    }
    p->scaler_.emplace(*s);
  }
  int64_t largest = 0;
  const tensor::ParameterLayout& layout = model->layout();
  for (const nn::GradRange& r : nn::GroupRanges(layout)) {
    largest = std::max(largest, r.hi - r.lo);
    p->range_names_.push_back(r.first_param < layout.num_params()
                                  ? LayerOf(layout.param(r.first_param).name)
                                  : absl::StrCat("group ", r.group));
  }
  if (options.precision != Precision::kFp32 && largest > 0) {
    ASSIGN_OR_RETURN(p->half_, backend->Allocate(largest * sizeof(uint16_t)));
  }
  return p;
}

sync::StepOptions StepPrecision::StepOptionsFor(int accumulation) const {
  sync::StepOptions o;
  o.grad_scale = 1.f / (static_cast<float>(accumulation) * loss_scale());
  o.skip_non_finite = options_.check_non_finite;
  return o;
}

void StepPrecision::OnRange(int64_t step, const nn::GradRange& r) {
  float* g = model_->storage().grads() + r.lo;
  const int64_t n = r.hi - r.lo;
  if (r.group == 0) {  // the first range backward reports
    for (const auto& [s, rank] : options_.inject_non_finite) {
      if (s == step && (rank < 0 || rank == rank_) && n > 0) {
        const float inf = std::numeric_limits<float>::infinity();
        (void)backend_->CopyToDevice(g, &inf, sizeof(float));
      }
    }
  }
  if (n == 0) return;
  uint16_t* h = half_.u16();
  switch (options_.precision) {
    case Precision::kFp32:
      return;
    case Precision::kBf16:
      backend_->CastF32ToBf16(n, g, h);
      backend_->CastBf16ToF32(n, h, g);
      return;
    case Precision::kFp16:
      backend_->CastF32ToF16(n, g, h);
      backend_->CastF16ToF32(n, h, g);
      return;
  }
}

absl::StatusOr<StepVerdict> StepPrecision::AfterStep(int64_t step,
                                                     const sync::StepReport& report) {
  StepVerdict v;
  v.applied = report.applied;
  const float scale_before = loss_scale();
  if (scaler_.has_value()) {
    ASSIGN_OR_RETURN(optim::LossScaleDecision d, scaler_->Update(!report.applied));
    (void)d;  // the strategy already skipped (report.applied is the decision)
  }
  if (report.applied) {
    skips_in_a_row_ = 0;
    first_bad_layer_.clear();
    return v;
  }
  ++skipped_;
  ++skips_in_a_row_;
  const int i = report.first_non_finite_range;
  const std::string layer = i >= 0 && i < static_cast<int>(range_names_.size())
                                ? range_names_[i]
                                : std::string("an unknown layer");
  if (first_bad_layer_.empty()) first_bad_layer_ = layer;
  v.skipped_because = absl::StrCat("non-finite gradients (first in layer ", layer, ")");
  if (scaler_.has_value()) {
    absl::StrAppend(&v.skipped_because, "; loss scale ", scale_before, " -> ", loss_scale());
  }
  if (skips_in_a_row_ >= options_.max_non_finite_steps) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", step, ": ", skips_in_a_row_,
        " steps in a row had non-finite (inf / NaN) gradients, first in layer ",
        first_bad_layer_, " (", layer, " this step)",
        scaler_.has_value() ? absl::StrCat(", loss scale now ", loss_scale()) : std::string(),
        "; training has diverged: lower --lr, set --max_grad_norm, or use --precision=fp32 "
        "(--max_nonfinite_steps sets how many skips in a row are tolerated)"));
  }
  return v;
}

std::string StepPrecision::SerializeState() const {
  return scaler_.has_value() ? scaler_->SerializeState() : std::string();
}

absl::Status StepPrecision::RestoreState(absl::string_view bytes) {
  if (bytes.empty() || !scaler_.has_value()) return absl::OkStatus();
  return scaler_->RestoreState(bytes);
}

}  // namespace worker
}  // namespace tandem
