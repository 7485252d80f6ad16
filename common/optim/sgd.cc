#include "common/optim/sgd.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace optim {
namespace {

// The loops below are written so the compiler vectorises them; the library is
// built with -ffp-contract=off so each line is one rounded fp32 operation,
// and the AVX2 build (cpu_dispatch.h) gives the same bits as the baseline.
TANDEM_CPU_INLINE void SgdPlainBody(float* __restrict p, const float* __restrict grad, int64_t n,
                                    float lr, float gs, float wd) {
  if (wd != 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] * gs;
      g = g + wd * p[i];
      p[i] = p[i] - lr * g;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] * gs;
      p[i] = p[i] - lr * g;
    }
  }
}
TANDEM_CPU_DISPATCHED(SgdPlain,
                      (float* __restrict p, const float* __restrict grad, int64_t n, float lr,
                       float gs, float wd),
                      (p, grad, n, lr, gs, wd))

// wd == 0 gets its own loop: one fewer read of p per element.
TANDEM_CPU_INLINE void SgdMomentumBody(float* __restrict p, const float* __restrict grad,
                                       float* __restrict buf, int64_t n, float lr, float gs,
                                       float wd, float mu) {
  if (wd != 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] * gs;
      g = g + wd * p[i];
      const float b = mu * buf[i] + g;
      buf[i] = b;
      p[i] = p[i] - lr * b;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float g = grad[i] * gs;
      const float b = mu * buf[i] + g;
      buf[i] = b;
      p[i] = p[i] - lr * b;
    }
  }
}
TANDEM_CPU_DISPATCHED(SgdMomentum,
                      (float* __restrict p, const float* __restrict grad, float* __restrict buf,
                       int64_t n, float lr, float gs, float wd, float mu),
                      (p, grad, buf, n, lr, gs, wd, mu))

TANDEM_CPU_INLINE void SgdNesterovBody(float* __restrict p, const float* __restrict grad,
                                       float* __restrict buf, int64_t n, float lr, float gs,
                                       float wd, float mu) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] * gs;
    if (wd != 0.0f) g = g + wd * p[i];
    const float b = mu * buf[i] + g;
    buf[i] = b;
    const float d = g + mu * b;
    p[i] = p[i] - lr * d;
  }
}
TANDEM_CPU_DISPATCHED(SgdNesterov,
                      (float* __restrict p, const float* __restrict grad, float* __restrict buf,
                       int64_t n, float lr, float gs, float wd, float mu),
                      (p, grad, buf, n, lr, gs, wd, mu))

}  // namespace

absl::StatusOr<std::unique_ptr<Sgd>> Sgd::Create(ParamRange range,
                                                 const SgdOptions& options) {
  RETURN_IF_ERROR(ValidateRange(range));
  if (!(options.momentum >= 0.0f && options.momentum < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SgdOptions.momentum must be in [0, 1), got ", options.momentum));
  }
  if (!(options.weight_decay >= 0.0f) || !std::isfinite(options.weight_decay)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SgdOptions.weight_decay must be finite and >= 0, got ",
                     options.weight_decay));
  }
  if (options.nesterov && options.momentum == 0.0f) {
    return absl::InvalidArgumentError(
        "SgdOptions.nesterov needs momentum > 0; set momentum (e.g. 0.9) or "
        "turn nesterov off");
  }
  return std::unique_ptr<Sgd>(new Sgd(range, options));
}

Sgd::Sgd(ParamRange range, const SgdOptions& options)
    : Optimizer(range), options_(options) {
  if (options_.momentum != 0.0f) momentum_buffer_.assign(range.size(), 0.0f);
}

absl::Status Sgd::Step(float* params, const float* grads, int64_t n,
                       const StepContext& ctx) {
  RETURN_IF_ERROR(CheckStepArgs(params, grads, n, ctx));
  return StepSlice(params, grads, 0, n, ctx);
}

absl::Status Sgd::StepSlice(float* params, const float* grads, int64_t offset, int64_t n,
                            const StepContext& ctx) {
  RETURN_IF_ERROR(CheckSliceArgs(params, grads, offset, n, ctx));
  const float mu = options_.momentum;
  const float wd = options_.weight_decay;
  if (mu == 0.0f) {
    SgdPlain(params, grads, n, ctx.lr, ctx.grad_scale, wd);
  } else if (options_.nesterov) {
    SgdNesterov(params, grads, momentum_buffer_.data() + offset, n, ctx.lr,
                ctx.grad_scale, wd, mu);
  } else {
    SgdMomentum(params, grads, momentum_buffer_.data() + offset, n, ctx.lr,
                ctx.grad_scale, wd, mu);
  }
  return absl::OkStatus();
}

std::vector<StateBuffer> Sgd::state() {
  std::vector<StateBuffer> out;
  if (options_.momentum != 0.0f) {
    out.push_back({"momentum_buffer", absl::MakeSpan(momentum_buffer_)});
  }
  return out;
}

void Sgd::ResetState() {
  std::fill(momentum_buffer_.begin(), momentum_buffer_.end(), 0.0f);
}

}  // namespace optim
}  // namespace tandem
