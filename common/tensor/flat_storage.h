// FlatStorage: a model's parameters in one contiguous fp32 device buffer and
// its gradients in a second one with the same ParameterLayout. Layers hold
// views (raw pointers) into both; optimizers and gradient sync work on flat
// ranges [lo, hi) of them.
//
//   ASSIGN_OR_RETURN(FlatStorage storage, FlatStorage::Create(backend, layout));
//   float* w = storage.param(i);   float* dw = storage.grad(i);
//
// Both buffers start zeroed (padding stays zero). Thread-compatible. Owns
// the buffers; the Backend must outlive it. Fails only on allocation.
#ifndef TANDEM_COMMON_TENSOR_FLAT_STORAGE_H_
#define TANDEM_COMMON_TENSOR_FLAT_STORAGE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/tensor/parameter_layout.h"

namespace tandem {
namespace tensor {

class FlatStorage {
 public:
  static absl::StatusOr<FlatStorage> Create(kernels::Backend* backend,
                                            const ParameterLayout& layout);
  FlatStorage() = default;
  FlatStorage(FlatStorage&&) = default;
  FlatStorage& operator=(FlatStorage&&) = default;

  float* params() const { return params_.f32(); }
  float* grads() const { return grads_.f32(); }
  int64_t size() const { return size_; }
  // Views of parameter `index` of the layout this was created with.
  float* param(int index) const { return params() + offsets_[index]; }
  float* grad(int index) const { return grads() + offsets_[index]; }

 private:
  kernels::DeviceBuffer params_;
  kernels::DeviceBuffer grads_;
  int64_t size_ = 0;
  std::vector<int64_t> offsets_;
};

}  // namespace tensor
}  // namespace tandem

#endif  // TANDEM_COMMON_TENSOR_FLAT_STORAGE_H_
