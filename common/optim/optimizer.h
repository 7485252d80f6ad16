// Optimizer: the interface every tandem optimizer implements, stepping one
// contiguous range [lo, hi) of the flat fp32 parameter vector.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<AdamW> opt,
//                    AdamW::Create(ParamRange{lo, hi}, AdamWOptions()));
//   StepContext ctx;
//   ctx.step = 1;
//   ctx.lr = schedule.LearningRate(1);
//   RETURN_IF_ERROR(opt->Step(params + lo, grads + lo, hi - lo, ctx));
//
// Ranges. An optimizer is built for one range [lo, hi) of the model's flat
// parameter vector (the whole model, a ZeRO shard or a shard server's slice)
// and allocates optimizer state for exactly hi - lo elements. Step() receives
// pointers to the *first element of that range* (params + lo, grads + lo) and
// n == hi - lo. Every update rule is element-wise, so stepping a range gives
// bit-for-bit the values of stepping the whole vector and slicing (tested).
//
// Arithmetic is fp32 and element-wise, compiled with -ffp-contract=off so no
// multiply-add is fused: the formulas documented in sgd.h / adamw.h are the
// exact order of operations (a CUDA port must use __fmul_rn/__fadd_rn or
// -fmad=false to match bit for bit; otherwise expect ~1 ulp differences).
// Per-step scalars (bias corrections, 1 - lr * wd) are computed once per step
// in double and rounded to float.
//
// Slices. Optimizers whose state is per element (Sgd, AdamW) also step a
// slice [lo + offset, lo + offset + n) of their range on its own
// (StepSlice): the allreduce strategy steps each bucket as soon as its
// allreduce completes. Stepping every slice of a tiling once with the same
// context gives the bits of one Step() (tested).
//
// Thread-safety: an Optimizer is not thread-safe; one thread steps it. Distinct
// optimizers (distinct ranges) may be stepped concurrently.
// Ownership: the optimizer owns its state buffers; params and grads belong to
// the caller and are only accessed during Step().
// Failure: Step() returns InvalidArgument for a wrong n, null pointers, a
// non-positive step number or a non-finite learning rate; it never aborts and
// leaves params and state untouched on error.
#ifndef TANDEM_COMMON_OPTIM_OPTIMIZER_H_
#define TANDEM_COMMON_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tandem {
namespace optim {

// The slice of the flat parameter vector an optimizer owns: [lo, hi).
struct ParamRange {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t size() const { return hi - lo; }
};

// Per-step inputs shared by all ranges of one model.
struct StepContext {
  // 1-based number of this update (the first applied update is step 1). Steps
  // skipped by the loss scaler do not count. AdamW's bias correction uses it.
  int64_t step = 1;
  // Learning rate for this step (from an LrSchedule).
  float lr = 0.0f;
  // Multiplier applied to every gradient before the update, fused into the
  // same pass: typically (1 / loss_scale) * clip_factor. 1 = use as is.
  float grad_scale = 1.0f;
};

// One named buffer of optimizer state (e.g. "exp_avg"), hi - lo floats,
// aligned element-for-element with the owned range. Checkpoints save and
// restore these by name.
struct StateBuffer {
  std::string name;
  absl::Span<float> data;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to params[0, n) using grads[0, n); both point at
  // element `range().lo` of the flat vectors and n must equal range().size().
  virtual absl::Status Step(float* params, const float* grads, int64_t n,
                            const StepContext& ctx) = 0;

  // Whether StepSlice is implemented (default: no).
  virtual bool supports_slices() const { return false; }

  // Applies one update to the slice [offset, offset + n) of the range only:
  // params and grads point at element range().lo + offset of the flat
  // vectors. InvalidArgument for a slice outside the range (or Step's
  // argument errors); Unimplemented where supports_slices() is false.
  virtual absl::Status StepSlice(float* params, const float* grads, int64_t offset, int64_t n,
                                 const StepContext& ctx);

  // Short name, e.g. "sgd", "adamw"; checkpoints record it.
  virtual std::string name() const = 0;

  // Mutable views of every state buffer (empty for plain SGD). Writing into
  // them (checkpoint restore) is allowed between steps.
  virtual std::vector<StateBuffer> state() = 0;

  // Resets all state to its initial value (zeros).
  virtual void ResetState() = 0;

  // Bytes of optimizer state held (for ZeRO accounting and metrics).
  int64_t state_bytes() {
    int64_t bytes = 0;
    for (const StateBuffer& b : state()) bytes += b.data.size() * sizeof(float);
    return bytes;
  }

  const ParamRange& range() const { return range_; }

 protected:
  explicit Optimizer(ParamRange range) : range_(range) {}

  // Validates the common Step() arguments; implementations call it first.
  absl::Status CheckStepArgs(const float* params, const float* grads,
                             int64_t n, const StepContext& ctx) const;
  // The same for StepSlice's slice [offset, offset + n) of the range.
  absl::Status CheckSliceArgs(const float* params, const float* grads, int64_t offset,
                              int64_t n, const StepContext& ctx) const;

 private:
  ParamRange range_;
};

// InvalidArgument unless 0 <= lo <= hi.
absl::Status ValidateRange(const ParamRange& range);

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_OPTIMIZER_H_
