#include "services/worker/pinned_staging.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "common/kernels/cuda/device.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
namespace {

class PinnedStaging final : public HostStaging {
 public:
  ~PinnedStaging() override {
    if (buffer_ != nullptr) cudaFreeHost(buffer_);
  }

  absl::StatusOr<float*> Reserve(int64_t n) override {
    if (n <= capacity_) return buffer_;
    if (buffer_ != nullptr) cudaFreeHost(buffer_);
    buffer_ = nullptr;
    capacity_ = 0;
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpoint staging: cudaHostAlloc of ", bytes, " pinned bytes failed: ",
          cudaGetErrorString(e), " (lower --checkpoint_every's memory or use pageable staging)"));
    }
    buffer_ = static_cast<float*>(p);
    capacity_ = n;
    return buffer_;
  }
  bool pinned() const override { return true; }
  int64_t capacity() const override { return capacity_; }

 private:
  float* buffer_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostStaging>> MakePinnedStaging() {
  ASSIGN_OR_RETURN(const int devices, cuda::DeviceCount());
  if (devices < 1) return absl::UnavailableError("pinned staging: no CUDA device");
  return std::unique_ptr<HostStaging>(new PinnedStaging());
}

}  // namespace worker
}  // namespace tandem
