// ParamHook: how a model asks for its parameters one layer at a time, so a
// strategy that shards the parameters themselves (ZeRO-3, zero3_sync.h) can
// materialise each layer's range of the flat parameter vector only while it
// is used.
//
// Before a layer's forward and again before its backward the model calls
// Gather(lo, hi, pass) with that layer's range [lo, hi) of the flat vector
// (Model::param_hook_ranges(), listed in forward order); after the layer has
// run it calls Release(lo, hi, pass). Forward visits the ranges in forward
// order, backward in the reverse order, so a hook can prefetch the next
// range (the next in forward order, or the previous in backward order)
// while the current one computes. After Gather returns OK, params[lo, hi)
// holds the current values; after Release its contents are undefined until
// the next Gather (a hook may return the pages to the OS).
//
//   class MyHook : public tensor::ParamHook { ... };
//   model->set_param_hook(&hook);   // nullptr: every parameter always resident
//
// Without a hook (the default) models call nothing: today's behaviour, at no
// cost. Thread-compatible: called from the thread running Forward/Backward.
// The model borrows the hook; it must outlive its use (set nullptr first).
// Failure: a Gather error (a failed collective) makes Forward / Backward
// return it.
#ifndef TANDEM_COMMON_TENSOR_PARAM_HOOK_H_
#define TANDEM_COMMON_TENSOR_PARAM_HOOK_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tandem {
namespace tensor {

enum class ParamPass { kForward, kBackward };

class ParamHook {
 public:
  virtual ~ParamHook() = default;
  // params[lo, hi) must hold the current parameters when this returns OK.
  virtual absl::Status Gather(int64_t lo, int64_t hi, ParamPass pass) = 0;
  // The layer that needed [lo, hi) is done with it.
  virtual void Release(int64_t lo, int64_t hi, ParamPass pass) = 0;
};

}  // namespace tensor
}  // namespace tandem

#endif  // TANDEM_COMMON_TENSOR_PARAM_HOOK_H_
