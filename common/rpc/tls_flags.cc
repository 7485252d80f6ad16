#include "common/rpc/tls_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate of this process (TLS on the gRPC plane; with --tls_key, --tls_ca).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA certificate(s) peers are verified against.");
ABSL_FLAG(bool, tls_mutual, false,
          "Mutual TLS: servers require client certificates signed by --tls_ca; clients send theirs.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name server certificates are checked against (\"\" = the host of the address dialled).");

namespace tandem {

TlsOptions TlsOptionsFromFlags() {
  TlsOptions o;
  o.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.key_file = absl::GetFlag(FLAGS_tls_key);
  o.ca_file = absl::GetFlag(FLAGS_tls_ca);
  o.mutual = absl::GetFlag(FLAGS_tls_mutual);
  o.server_name = absl::GetFlag(FLAGS_tls_server_name);
  return o;
}

absl::Status InstallTlsFromFlags() {
  absl::StatusOr<TlsConfig> tls = LoadTls(TlsOptionsFromFlags());
  if (!tls.ok()) return tls.status();
  SetDefaultTls(*tls);
  return absl::OkStatus();
}

}  // namespace tandem
