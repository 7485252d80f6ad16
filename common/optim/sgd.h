// SGD with momentum, Nesterov momentum and (coupled, L2) weight decay over one
// range [lo, hi) of the flat parameter vector. See optimizer.h for ranges,
// thread-safety and failure behaviour.
//
// Exact update, per element i, in this order, all in fp32 with no fused
// multiply-add (mu = momentum, wd = weight_decay, lr = ctx.lr):
//
//   g   = grad[i] * ctx.grad_scale
//   g   = g + wd * p[i]                      (only if wd != 0)
//   if mu != 0:
//     buf[i] = mu * buf[i] + g               (buf starts at 0, so step 1
//                                             gives buf = g, as PyTorch)
//     d = nesterov ? g + mu * buf[i] : buf[i]
//   else:
//     d = g
//   p[i] = p[i] - lr * d
//
// This is torch.optim.SGD with dampening = 0. State: "momentum_buffer"
// (hi - lo floats) when momentum != 0, otherwise none.
#ifndef TANDEM_COMMON_OPTIM_SGD_H_
#define TANDEM_COMMON_OPTIM_SGD_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace optim {

struct SgdOptions {
  // Momentum coefficient mu in [0, 1). 0 = plain SGD, no state.
  float momentum = 0.0f;
  // Nesterov momentum; requires momentum > 0.
  bool nesterov = false;
  // L2 weight decay added to the gradient (coupled, as torch.optim.SGD), >= 0.
  float weight_decay = 0.0f;
};

class Sgd final : public Optimizer {
 public:
  // InvalidArgument for a bad range or options (message names the field).
  static absl::StatusOr<std::unique_ptr<Sgd>> Create(ParamRange range,
                                                     const SgdOptions& options);

  absl::Status Step(float* params, const float* grads, int64_t n,
                    const StepContext& ctx) override;
  bool supports_slices() const override { return true; }
  absl::Status StepSlice(float* params, const float* grads, int64_t offset, int64_t n,
                         const StepContext& ctx) override;
  std::string name() const override { return "sgd"; }
  std::vector<StateBuffer> state() override;
  void ResetState() override;

  const SgdOptions& options() const { return options_; }

 private:
  Sgd(ParamRange range, const SgdOptions& options);

  SgdOptions options_;
  std::vector<float> momentum_buffer_;  // hi - lo floats, or empty
};

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_SGD_H_
