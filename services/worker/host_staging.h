// HostStaging: the host memory a checkpoint copies device-resident
// parameters into at the step boundary (Checkpointer::HostParams), before
// the snapshot or the file is made from it (issue 34 item 4). Two kinds:
// pageable (a std::vector; host backends never need one) and, when the
// model lives on a GPU, page-locked memory (pinned_staging.h), which the
// device copies into at full PCIe / NVLink-C2C speed with no bounce buffer.
//
//   std::unique_ptr<HostStaging> s = MakePageableStaging();
//   ASSIGN_OR_RETURN(float* host, s->Reserve(n));   // grown once, then reused
//   RETURN_IF_ERROR(backend->CopyToHost(host, device_params, n * sizeof(float)));
//
// Reserve keeps the buffer (and its contents) while n does not grow.
// Thread-compatible; the object owns its memory.
#ifndef TANDEM_SERVICES_WORKER_HOST_STAGING_H_
#define TANDEM_SERVICES_WORKER_HOST_STAGING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace worker {

class HostStaging {
 public:
  virtual ~HostStaging() = default;
  // At least n floats of host memory.
  virtual absl::StatusOr<float*> Reserve(int64_t n) = 0;
  virtual bool pinned() const = 0;
  virtual int64_t capacity() const = 0;  // floats
};

class PageableStaging final : public HostStaging {
 public:
  absl::StatusOr<float*> Reserve(int64_t n) override {
    if (static_cast<int64_t>(buffer_.size()) < n) buffer_.resize(n);
    return buffer_.data();
  }
  bool pinned() const override { return false; }
  int64_t capacity() const override { return static_cast<int64_t>(buffer_.size()); }

 private:
  std::vector<float> buffer_;
};

inline std::unique_ptr<HostStaging> MakePageableStaging() {
  return std::make_unique<PageableStaging>();
}

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_HOST_STAGING_H_
