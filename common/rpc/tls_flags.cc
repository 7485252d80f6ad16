#include "common/rpc/tls_flags.h"

namespace tandem {

absl::Status InstallTls(const TlsOptions& options) {
  absl::StatusOr<TlsConfig> tls = LoadTls(options);
  if (!tls.ok()) return tls.status();
  SetDefaultTls(*tls);
  return absl::OkStatus();
}

}  // namespace tandem
