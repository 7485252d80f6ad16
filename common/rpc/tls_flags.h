// The --tls_* command-line flags every tandem service shares, and the one
// call its main() makes to install them (common/rpc/tls.h):
//
//   if (absl::Status s = InstallTlsFromFlags(); !s.ok()) { print s; return 1; }
//
// Call after absl::ParseCommandLine and before any channel or server
// exists. Not thread-safe (main() only).
#ifndef TANDEM_COMMON_RPC_TLS_FLAGS_H_
#define TANDEM_COMMON_RPC_TLS_FLAGS_H_

#include "absl/status/status.h"
#include "common/rpc/tls.h"

namespace tandem {

// The flags' values as TlsOptions.
TlsOptions TlsOptionsFromFlags();

// LoadTls(TlsOptionsFromFlags()) installed with SetDefaultTls.
absl::Status InstallTlsFromFlags();

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_TLS_FLAGS_H_
