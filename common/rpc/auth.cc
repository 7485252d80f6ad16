#include "common/rpc/auth.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace tandem {
namespace {

std::string& DefaultToken() {
  static std::string* token = new std::string();
  return *token;
}

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

class TokenSender final : public grpc::experimental::Interceptor {
 public:
  explicit TokenSender(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kAuthTokenMetadataKey, *token_});
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;
};

class TokenSenderFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenSenderFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenSender(&token_);
  }

 private:
  const std::string token_;
};

}  // namespace

absl::StatusOr<std::string> LoadAuthToken(const std::string& token_file) {
  if (token_file.empty()) {
    const char* env = std::getenv("TANDEM_TOKEN");
    return std::string(env == nullptr ? "" : absl::StripAsciiWhitespace(env));
  }
  std::ifstream in(token_file);
  if (!in) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot read the token file ", token_file, ": ",
                                          std::strerror(err));
    if (err == EACCES) return absl::PermissionDeniedError(what);
    return absl::NotFoundError(what);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file ", token_file, " is empty: write the job's token into it"));
  }
  return token;
}

std::string NewAuthToken() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&out, absl::StrFormat("%08x", rd()));
  return out;
}

void SetDefaultAuthToken(const std::string& token) { DefaultToken() = token; }
const std::string& DefaultAuthToken() { return DefaultToken(); }

grpc::Status CheckCallToken(const grpc::ServerContextBase& ctx, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kAuthTokenMetadataKey);
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this job's services need its token: start the process with "
                        "--token_file=<file> (tandem local writes <run_dir>/token) or with "
                        "TANDEM_TOKEN set");
  }
  if (!ConstantTimeEqual(absl::string_view(it->second.data(), it->second.size()), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the token sent is not this job's: is the process pointed at another "
                        "job's services, or given another run's token file?");
  }
  return grpc::Status::OK;
}

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> MakeTokenSender(
    const std::string& token) {
  return std::make_unique<TokenSenderFactory>(token);
}

}  // namespace tandem
