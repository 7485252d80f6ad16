#include "common/kernels/backend.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace kernels {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(other.backend_), data_(other.data_), bytes_(other.bytes_) {
  other.backend_ = nullptr;
  other.data_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    backend_ = other.backend_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.backend_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr && backend_ != nullptr) backend_->Free(data_);
  backend_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<DeviceBuffer> Backend::Allocate(size_t bytes) {
  if (bytes == 0) return DeviceBuffer();
  absl::StatusOr<void*> ptr = AllocateRaw(bytes);
  if (!ptr.ok()) return ptr.status();
  return DeviceBuffer(this, *ptr, bytes);
}

namespace {

struct Registry {
  absl::Mutex mu;
  std::map<std::string, BackendFactory> factories ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  // Never destroyed: registrars may run during static initialisation and
  // lookups during static destruction.
  static Registry* registry = new Registry;
  return *registry;
}

}  // namespace

bool RegisterBackendFactory(const std::string& name, BackendFactory factory) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  r.factories[name] = std::move(factory);
  return true;
}

BackendFactory FindBackendFactory(const std::string& name) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.factories.find(name);
  if (it == r.factories.end()) return nullptr;
  return it->second;
}

std::vector<std::string> RegisteredBackendNames() {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

}  // namespace kernels
}  // namespace tandem
