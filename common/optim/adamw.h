// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay and bias
// correction, over one range [lo, hi) of the flat parameter vector. See
// optimizer.h for ranges, thread-safety and failure behaviour.
//
// Per-step scalars, computed in double from t = ctx.step and rounded to fp32:
//
//   decay        = float(1 - lr * weight_decay)
//   step_size    = float(lr / (1 - beta1^t))
//   inv_sqrt_bc2 = float(1 / sqrt(1 - beta2^t))
//   one_m_b1     = float(1 - beta1),  one_m_b2 = float(1 - beta2)
//
// Exact update, per element i, in this order, all in fp32 with no fused
// multiply-add:
//
//   g     = grad[i] * ctx.grad_scale
//   p     = p[i] * decay                          (decoupled weight decay)
//   m[i]  = beta1 * m[i] + one_m_b1 * g
//   v[i]  = beta2 * v[i] + one_m_b2 * (g * g)
//   denom = sqrtf(v[i]) * inv_sqrt_bc2 + eps
//   p[i]  = p - step_size * (m[i] / denom)
//
// Up to rounding this is torch.optim.AdamW (amsgrad = False). State:
// "exp_avg" (m) and "exp_avg_sq" (v), hi - lo floats each, zero-initialised.
#ifndef TANDEM_COMMON_OPTIM_ADAMW_H_
#define TANDEM_COMMON_OPTIM_ADAMW_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace optim {

struct AdamWOptions {
  float beta1 = 0.9f;           // in [0, 1)
  float beta2 = 0.999f;         // in [0, 1)
  float eps = 1e-8f;            // > 0
  float weight_decay = 0.01f;   // decoupled, >= 0 (torch default 0.01)
};

// The per-step scalars above, exposed so other backends (CUDA) compute them
// identically.
struct AdamWScalars {
  float decay;
  float step_size;
  float inv_sqrt_bc2;
  float one_minus_beta1;
  float one_minus_beta2;
};
AdamWScalars ComputeAdamWScalars(const AdamWOptions& options, int64_t step,
                                 float lr);

class AdamW final : public Optimizer {
 public:
  // InvalidArgument for a bad range or options (message names the field).
  static absl::StatusOr<std::unique_ptr<AdamW>> Create(
      ParamRange range, const AdamWOptions& options);

  absl::Status Step(float* params, const float* grads, int64_t n,
                    const StepContext& ctx) override;
  bool supports_slices() const override { return true; }
  absl::Status StepSlice(float* params, const float* grads, int64_t offset, int64_t n,
                         const StepContext& ctx) override;
  std::string name() const override { return "adamw"; }
  std::vector<StateBuffer> state() override;
  void ResetState() override;

  const AdamWOptions& options() const { return options_; }

 private:
  AdamW(ParamRange range, const AdamWOptions& options);

  AdamWOptions options_;
  std::vector<float> exp_avg_;     // m, hi - lo floats
  std::vector<float> exp_avg_sq_;  // v, hi - lo floats
};

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_ADAMW_H_
