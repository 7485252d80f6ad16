// A job's own certificate authority, made on the spot: what `tandem local
// --tls` (and tests) use so that a run gets mutual TLS without anyone
// handing it certificates. Runs the `openssl` command (Debian package
// openssl, installed by tools/setup.sh).
//
//   ASSIGN_OR_RETURN(JobCertificates certs, MakeJobCertificates(dir, {}));
//   TlsOptions tls{certs.cert_file, certs.key_file, certs.ca_file, true, certs.server_name};
//
// Writes into `dir` (created if missing): ca.pem / ca.key (a self-signed CA,
// EC P-256), and node.pem / node.key, one certificate every process of the
// job presents as server and as client (extended key usage serverAuth and
// clientAuth; subject alternative names `server_name`, localhost and
// 127.0.0.1). Keys are mode 0600. Not thread-safe for one `dir`.
#ifndef TANDEM_COMMON_RPC_TLS_CERTS_H_
#define TANDEM_COMMON_RPC_TLS_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem {

struct JobCertificateOptions {
  // The name clients check (TlsOptions::server_name).
  std::string server_name = "tandem.job";
  int valid_days = 30;
  std::string openssl = "openssl";  // the binary (PATH lookup)
};

struct JobCertificates {
  std::string ca_file, ca_key_file, cert_file, key_file;
  std::string server_name;
};

// FAILED_PRECONDITION saying what to install when openssl cannot be run;
// INTERNAL with openssl's output when a step fails.
absl::StatusOr<JobCertificates> MakeJobCertificates(const std::string& dir,
                                                    const JobCertificateOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_TLS_CERTS_H_
