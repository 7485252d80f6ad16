#include "common/optim/adamw.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace optim {
namespace {

// Built with -ffp-contract=off: each line is one rounded fp32 operation, so
// the vectorised body and the scalar tail agree, any sub-range agrees with
// the whole vector, and the AVX2 build (cpu_dispatch.h; sqrt and division
// are correctly rounded at every width) gives the baseline's bits.
TANDEM_CPU_INLINE void AdamWKernelBody(float* __restrict p, const float* __restrict grad,
                                       float* __restrict m, float* __restrict v, int64_t n,
                                       const AdamWScalars& s, float beta1, float beta2,
                                       float eps, float gs) {
  const float decay = s.decay;
  const float step_size = s.step_size;
  const float inv_sqrt_bc2 = s.inv_sqrt_bc2;
  const float omb1 = s.one_minus_beta1;
  const float omb2 = s.one_minus_beta2;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * gs;
    const float pd = p[i] * decay;
    const float mi = beta1 * m[i] + omb1 * g;
    const float vi = beta2 * v[i] + omb2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * inv_sqrt_bc2 + eps;
    p[i] = pd - step_size * (mi / denom);
  }
}

TANDEM_CPU_DISPATCHED(AdamWKernel,
                      (float* __restrict p, const float* __restrict grad, float* __restrict m,
                       float* __restrict v, int64_t n, const AdamWScalars& s, float beta1,
                       float beta2, float eps, float gs),
                      (p, grad, m, v, n, s, beta1, beta2, eps, gs))

absl::Status CheckUnit(const char* field, float x) {
  if (!(x >= 0.0f && x < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamWOptions.", field, " must be in [0, 1), got ", x));
  }
  return absl::OkStatus();
}

}  // namespace

AdamWScalars ComputeAdamWScalars(const AdamWOptions& o, int64_t step,
                                 float lr) {
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(o.beta2), t);
  AdamWScalars s;
  s.decay = static_cast<float>(1.0 - static_cast<double>(lr) *
                                         static_cast<double>(o.weight_decay));
  s.step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  s.one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(o.beta1));
  s.one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(o.beta2));
  return s;
}

absl::StatusOr<std::unique_ptr<AdamW>> AdamW::Create(
    ParamRange range, const AdamWOptions& options) {
  RETURN_IF_ERROR(ValidateRange(range));
  RETURN_IF_ERROR(CheckUnit("beta1", options.beta1));
  RETURN_IF_ERROR(CheckUnit("beta2", options.beta2));
  if (!(options.eps > 0.0f) || !std::isfinite(options.eps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdamWOptions.eps must be finite and > 0, got ", options.eps));
  }
  if (!(options.weight_decay >= 0.0f) || !std::isfinite(options.weight_decay)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdamWOptions.weight_decay must be finite and >= 0, got ",
                     options.weight_decay));
  }
  return std::unique_ptr<AdamW>(new AdamW(range, options));
}

AdamW::AdamW(ParamRange range, const AdamWOptions& options)
    : Optimizer(range),
      options_(options),
      exp_avg_(range.size(), 0.0f),
      exp_avg_sq_(range.size(), 0.0f) {}

absl::Status AdamW::Step(float* params, const float* grads, int64_t n,
                         const StepContext& ctx) {
  RETURN_IF_ERROR(CheckStepArgs(params, grads, n, ctx));
  return StepSlice(params, grads, 0, n, ctx);
}

absl::Status AdamW::StepSlice(float* params, const float* grads, int64_t offset, int64_t n,
                              const StepContext& ctx) {
  RETURN_IF_ERROR(CheckSliceArgs(params, grads, offset, n, ctx));
  const AdamWScalars s = ComputeAdamWScalars(options_, ctx.step, ctx.lr);
  AdamWKernel(params, grads, exp_avg_.data() + offset, exp_avg_sq_.data() + offset, n, s,
              options_.beta1, options_.beta2, options_.eps, ctx.grad_scale);
  return absl::OkStatus();
}

std::vector<StateBuffer> AdamW::state() {
  return {{"exp_avg", absl::MakeSpan(exp_avg_)},
          {"exp_avg_sq", absl::MakeSpan(exp_avg_sq_)}};
}

void AdamW::ResetState() {
  std::fill(exp_avg_.begin(), exp_avg_.end(), 0.0f);
  std::fill(exp_avg_sq_.begin(), exp_avg_sq_.end(), 0.0f);
}

}  // namespace optim
}  // namespace tandem
