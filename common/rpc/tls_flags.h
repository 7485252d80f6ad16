// The --tls_* command-line flags every tandem service takes, and the call
// its main() makes to install them (common/rpc/tls.h). Flags live only in
// main.cc files: each service's main.cc expands TANDEM_TLS_FLAGS() once at
// file scope, which defines the five flags and tandem::TlsOptionsFromFlags()
// in that file, then, after absl::ParseCommandLine and before any channel or
// server exists:
//
//   TANDEM_TLS_FLAGS();   // file scope, main.cc only
//   ...
//   if (absl::Status s = tandem::InstallTls(tandem::TlsOptionsFromFlags()); !s.ok()) {
//     print s; return 1;
//   }
//
// InstallTls fails with LoadTls's error (a missing or unreadable PEM file,
// a key without a certificate, ...). Not thread-safe (main() only).
#ifndef TANDEM_COMMON_RPC_TLS_FLAGS_H_
#define TANDEM_COMMON_RPC_TLS_FLAGS_H_

#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "common/rpc/tls.h"

namespace tandem {

// LoadTls(options) installed with SetDefaultTls.
absl::Status InstallTls(const TlsOptions& options);

}  // namespace tandem

// Defines --tls_cert, --tls_key, --tls_ca, --tls_mutual, --tls_server_name
// and tandem::TlsOptionsFromFlags() in the main.cc that expands it.
#define TANDEM_TLS_FLAGS()                                                                    \
  ABSL_FLAG(std::string, tls_cert, "",                                                        \
            "PEM certificate of this process (TLS on the gRPC plane; with --tls_key, "        \
            "--tls_ca).");                                                                    \
  ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");                      \
  ABSL_FLAG(std::string, tls_ca, "", "PEM CA certificate(s) peers are verified against.");    \
  ABSL_FLAG(bool, tls_mutual, false,                                                          \
            "Mutual TLS: servers require client certificates signed by --tls_ca; clients "    \
            "send theirs.");                                                                  \
  ABSL_FLAG(std::string, tls_server_name, "",                                                 \
            "Name server certificates are checked against (\"\" = the host of the address "   \
            "dialled).");                                                                     \
  namespace tandem {                                                                          \
  inline TlsOptions TlsOptionsFromFlags() {                                                   \
    TlsOptions o;                                                                             \
    o.cert_file = absl::GetFlag(FLAGS_tls_cert);                                              \
    o.key_file = absl::GetFlag(FLAGS_tls_key);                                                \
    o.ca_file = absl::GetFlag(FLAGS_tls_ca);                                                  \
    o.mutual = absl::GetFlag(FLAGS_tls_mutual);                                               \
    o.server_name = absl::GetFlag(FLAGS_tls_server_name);                                     \
    return o;                                                                                 \
  }                                                                                           \
  }                                                                                           \
  static_assert(true, "TANDEM_TLS_FLAGS() takes a semicolon")

#endif  // TANDEM_COMMON_RPC_TLS_FLAGS_H_
