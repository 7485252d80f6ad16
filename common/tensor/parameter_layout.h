// ParameterLayout: where each parameter of a model lives in its flat
// parameter vector (and, identically, in its flat gradient vector).
//
// Parameters are listed in the order backward finalises their gradients
// (the last layer's first), at increasing offsets. So as backward runs, the
// finished part of the gradient vector is a growing prefix [0, hi): gradient
// buckets are contiguous ranges, and sync can start on a bucket as soon as
// backward passes its end. Every offset is a multiple of kAlignElems (64
// bytes); the few padding elements between parameters stay zero in both
// vectors.
//
//   ParameterLayout layout;
//   int w = layout.Add("fc2.weight", {10, 1024});
//   int64_t off = layout.param(w).offset;
//
// Thread-compatible; immutable once built (share it by const reference).
#ifndef TANDEM_COMMON_TENSOR_PARAMETER_LAYOUT_H_
#define TANDEM_COMMON_TENSOR_PARAMETER_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {
namespace tensor {

struct ParameterInfo {
  std::string name;          // "h0.attn.qkv.weight"
  std::vector<int64_t> shape;
  int64_t offset = 0;        // in elements (fp32) from the start of the vector
  int64_t size = 0;          // product of shape
  // Which group of parameters backward finalises together (one per layer);
  // groups are numbered in backward order from 0.
  int group = 0;
};

class ParameterLayout {
 public:
  static constexpr int64_t kAlignElems = 16;

  // Appends a parameter after the previous one; returns its index. Shapes
  // must have positive dimensions (DCHECKed: layouts are built by code).
  int Add(const std::string& name, std::vector<int64_t> shape, int group);

  const std::vector<ParameterInfo>& params() const { return params_; }
  const ParameterInfo& param(int index) const { return params_[index]; }
  int num_params() const { return static_cast<int>(params_.size()); }
  // Length of the flat vector, padding included.
  int64_t total_size() const { return total_size_; }
  // Sum of parameter sizes (no padding): the model's parameter count.
  int64_t num_elements() const;

  // Index of the parameter called `name`, or NotFound.
  absl::StatusOr<int> Find(const std::string& name) const;

  // OK when `other` has the same parameters (names, shapes, offsets);
  // otherwise FailedPrecondition naming the first difference. Use it to
  // refuse a checkpoint from another model.
  absl::Status CheckSameAs(const ParameterLayout& other) const;

  // A stable 64-bit hash of names, shapes and offsets.
  uint64_t Fingerprint() const;

  // "name [d0, d1] @offset" per line.
  std::string DebugString() const;

 private:
  std::vector<ParameterInfo> params_;
  int64_t total_size_ = 0;
};

}  // namespace tensor
}  // namespace tandem

#endif  // TANDEM_COMMON_TENSOR_PARAMETER_LAYOUT_H_
