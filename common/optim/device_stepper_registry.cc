#include "common/optim/device_stepper_registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace optim {
namespace {

absl::Mutex& Mu() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}
std::map<std::string, BackendDeviceStepperCreator>& Creators() {
  static auto* creators = new std::map<std::string, BackendDeviceStepperCreator>();
  return *creators;
}

}  // namespace

bool RegisterDeviceStepper(const std::string& backend_name, BackendDeviceStepperCreator creator) {
  absl::MutexLock lock(&Mu());
  if (backend_name.empty() || !creator || Creators().count(backend_name) != 0) {
    std::fprintf(stderr,
                 "tandem device stepper registry: bad or repeated registration for backend "
                 "'%s' (registered twice or without a creator)\n",
                 backend_name.c_str());
    std::abort();
  }
  Creators().emplace(backend_name, std::move(creator));
  return true;
}

std::vector<std::string> RegisteredDeviceSteppers() {
  absl::MutexLock lock(&Mu());
  std::vector<std::string> names;
  for (const auto& kv : Creators()) names.push_back(kv.first);
  return names;
}

DeviceStepperFactory DeviceStepperFactoryFor(kernels::Backend* backend) {
  if (backend == nullptr || backend->host_accessible()) return DeviceStepperFactory();
  const std::string name = backend->name();
  BackendDeviceStepperCreator creator;
  {
    absl::MutexLock lock(&Mu());
    auto it = Creators().find(name);
    if (it != Creators().end()) creator = it->second;
  }
  if (!creator) {
    std::vector<std::string> have = RegisteredDeviceSteppers();
    const std::string message =
        absl::StrCat("backend '", name,
                     "' keeps parameters in device memory but this binary has no device "
                     "stepper for it (registered: ",
                     have.empty() ? std::string("none") : absl::StrJoin(have, ", "),
                     "); link its stepper library, e.g. //common/optim/cuda:cuda_device_stepper");
    return [message](optim::Optimizer*) -> absl::StatusOr<std::unique_ptr<DeviceStepper>> {
      return absl::UnimplementedError(message);
    };
  }
  return [creator, backend](optim::Optimizer* host) { return creator(backend, host); };
}

}  // namespace optim
}  // namespace tandem
