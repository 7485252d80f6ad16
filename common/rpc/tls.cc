#include "common/rpc/tls.h"

#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

TlsConfig& Default() {
  static TlsConfig* config = new TlsConfig();
  return *config;
}

// The contents of `path` given as `flag`, which must hold a PEM block whose
// label contains `kind` ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag, const char* kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(absl::StrCat("cannot read ", flag, " file ", path,
                                            ": check the path and its permissions"));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t begin = text.find("-----BEGIN ");
  const size_t end = begin == std::string::npos ? begin : text.find("-----", begin + 11);
  if (end == std::string::npos ||
      !absl::StrContains(text.substr(begin, end - begin), kind)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " file ", path, " holds no PEM ", kind,
                                                   " block (-----BEGIN ... ", kind, "-----)"));
  }
  return text;
}

}  // namespace

absl::StatusOr<TlsConfig> LoadTls(const TlsOptions& o) {
  TlsConfig c;
  if (o.cert_file.empty() && o.key_file.empty() && o.ca_file.empty() && !o.mutual) return c;
  if (o.cert_file.empty() != o.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together: give both (the certificate and its private key)");
  }
  if (o.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs --tls_ca (the CA certificate peers are verified against)");
  }
  if (o.mutual && o.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_mutual needs this process's --tls_cert and --tls_key (signed by --tls_ca)");
  }
  c.enabled = true;
  c.mutual = o.mutual;
  c.server_name = o.server_name;
  auto ca = ReadPem(o.ca_file, "--tls_ca", "CERTIFICATE");
  if (!ca.ok()) return ca.status();
  c.ca_pem = *std::move(ca);
  if (!o.cert_file.empty()) {
    auto cert = ReadPem(o.cert_file, "--tls_cert", "CERTIFICATE");
    if (!cert.ok()) return cert.status();
    auto key = ReadPem(o.key_file, "--tls_key", "PRIVATE KEY");
    if (!key.ok()) return key.status();
    c.cert_pem = *std::move(cert);
    c.key_pem = *std::move(key);
  }
  return c;
}

void SetDefaultTls(const TlsConfig& config) { Default() = config; }
const TlsConfig& DefaultTls() { return Default(); }

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsConfig& c) {
  if (!c.enabled) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(
      c.mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
               : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  o.pem_root_certs = c.ca_pem;
  o.pem_key_cert_pairs.push_back({c.key_pem, c.cert_pem});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsConfig& c) {
  if (!c.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = c.ca_pem;
  if (!c.cert_pem.empty()) {
    o.pem_private_key = c.key_pem;
    o.pem_cert_chain = c.cert_pem;
  }
  return grpc::SslCredentials(o);
}

}  // namespace tandem
