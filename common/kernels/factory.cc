#include "common/kernels/factory.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kernels/cpu_backend.h"

namespace tandem {
namespace kernels {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options) {
  if (options.device == "cpu") return CreateCpuBackend(options);
  BackendFactory factory = FindBackendFactory(options.device);
  absl::Status why;
  if (factory == nullptr) {
    std::vector<std::string> names = RegisteredBackendNames();
    names.insert(names.begin(), "cpu");
    why = absl::NotFoundError(absl::StrCat(
        "backend \"", options.device, "\" is not linked into this binary (",
        "available: ", absl::StrJoin(names, ", "),
        "); for \"cuda\" depend on //common/kernels/cuda"));
  } else {
    absl::StatusOr<std::unique_ptr<Backend>> backend = factory(options);
    if (backend.ok() || !absl::IsUnavailable(backend.status())) return backend;
    why = backend.status();
  }
  if (!options.allow_cpu_fallback) return why;
  std::fprintf(stderr, "tandem: backend \"%s\" unavailable (%s); using cpu\n",
               options.device.c_str(), std::string(why.message()).c_str());
  return CreateCpuBackend(options);
}

}  // namespace kernels
}  // namespace tandem
