#include "common/tensor/flat_storage.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace tensor {

absl::StatusOr<FlatStorage> FlatStorage::Create(kernels::Backend* backend,
                                                const ParameterLayout& layout) {
  FlatStorage s;
  s.size_ = layout.total_size();
  const size_t bytes = static_cast<size_t>(s.size_) * sizeof(float);
  ASSIGN_OR_RETURN(s.params_, backend->Allocate(bytes));
  ASSIGN_OR_RETURN(s.grads_, backend->Allocate(bytes));
  if (s.size_ > 0) {
    backend->Fill(s.params_.f32(), s.size_, 0.f);
    backend->Fill(s.grads_.f32(), s.size_, 0.f);
  }
  for (const ParameterInfo& p : layout.params()) s.offsets_.push_back(p.offset);
  return s;
}

}  // namespace tensor
}  // namespace tandem
