// CreateBackend: picks a compute Backend by name at run time.
//
//   BackendOptions options;
//   options.device = "cuda";   // falls back to "cpu" without a GPU
//   ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(options));
//
// "cpu" is always available (this target links the CPU backend). Other names
// ("cuda") come from factories registered with RegisterBackendFactory() by
// libraries linked into the binary (//common/kernels/cuda). When the requested
// backend is not linked in or reports UnavailableError (no device), and
// options.allow_cpu_fallback is set, a CPU backend is returned and a one-line
// note is written to stderr; otherwise the error is returned.
// Thread-safe.
#ifndef TANDEM_COMMON_KERNELS_FACTORY_H_
#define TANDEM_COMMON_KERNELS_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"

namespace tandem {
namespace kernels {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(
    const BackendOptions& options);

}  // namespace kernels
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_FACTORY_H_
