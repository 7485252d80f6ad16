// TLS (and mutual TLS) for tandem's gRPC control plane.
//
// Off by default. Every process of a job loads the same settings once in
// main() (common/rpc/tls_flags.h does it from --tls_* flags) and installs
// them as the process default, before any channel or server exists:
//
//   ASSIGN_OR_RETURN(TlsConfig tls, LoadTls(options));
//   SetDefaultTls(tls);
//
// From then on RpcServer listens with ServerCredentials() and MakeChannel
// connects with ChannelCredentials(). With `mutual`, servers require a client
// certificate signed by the CA and clients present theirs, so only holders
// of a job certificate can connect at all; the per-job token
// (common/rpc/auth.h) is still checked on top. Only the gRPC plane is
// covered: the collectives' data plane (Gloo TCP, shared memory, NCCL) is
// not encrypted.
//
// Thread-safety: SetDefaultTls is meant for main() before threads start;
// the getters are safe from any thread after.
#ifndef TANDEM_COMMON_RPC_TLS_H_
#define TANDEM_COMMON_RPC_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace tandem {

// Where the PEM files are. All empty = TLS off.
struct TlsOptions {
  std::string cert_file;  // this process's certificate (chain), PEM
  std::string key_file;   // its private key, PEM
  std::string ca_file;    // the CA certificates peers are verified against, PEM
  // Servers require and verify client certificates. (Clients present
  // theirs whenever they have one.)
  bool mutual = false;
  // The name clients check the server certificate against ("" = the host
  // of the target address). `tandem local` issues one certificate for every
  // node address under one name.
  std::string server_name;
};

// The loaded PEM contents.
struct TlsConfig {
  bool enabled = false;
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  bool mutual = false;
  std::string server_name;
};

// Reads and checks the files: NOT_FOUND naming a file that cannot be read;
// INVALID_ARGUMENT naming the flag when a file holds no PEM block of the
// right kind, when a certificate comes without its key (or the reverse),
// when TLS is asked for without a CA, or when `mutual` lacks this process's
// certificate and key. All fields empty and !mutual: a disabled config.
absl::StatusOr<TlsConfig> LoadTls(const TlsOptions& options);

void SetDefaultTls(const TlsConfig& config);
const TlsConfig& DefaultTls();

// Credentials for `config` (insecure when it is disabled). A server needs
// the certificate and key; a client needs the CA (and, when mutual, its
// certificate and key).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsConfig& config);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsConfig& config);

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_TLS_H_
