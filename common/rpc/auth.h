// Per-job tokens on every RPC: who may talk to a job's services.
//
// A job has one secret token (`tandem local` makes one per run in
// <run_dir>/token; an orchestrator mounts one from a Secret). Every process
// of the job loads it once in main() and installs it as the process
// default:
//
//   ASSIGN_OR_RETURN(std::string token, LoadAuthToken(absl::GetFlag(FLAGS_token_file)));
//   SetDefaultAuthToken(token);      // before any channel or server exists
//
// From then on every channel from MakeChannel sends it (metadata
// "x-tandem-token", through a client interceptor). Each service is given
// the token in its options and checks it first thing in every handler:
//
//   if (grpc::Status s = CheckCallToken(*ctx, token_); !s.ok()) return s;
//
// A call without it, or with another job's, fails with UNAUTHENTICATED
// before the handler touches any state, with a message saying how to pass
// the token. An empty token means no check (the default, and what tests
// without a token get). (gRPC's AuthMetadataProcessor would do this before
// the handler, but gRPC 1.51 asserts when one is set on insecure server
// credentials; TLS is not configured here yet.)
//
// Thread-safety: SetDefaultAuthToken is meant for main() before threads
// start; the getters are safe from any thread after. The comparison is
// constant-time.
#ifndef TANDEM_COMMON_RPC_AUTH_H_
#define TANDEM_COMMON_RPC_AUTH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/client_interceptor.h"

namespace tandem {

inline constexpr char kAuthTokenMetadataKey[] = "x-tandem-token";

// The token in `token_file` (surrounding whitespace stripped), else the
// environment variable TANDEM_TOKEN, else "". NOT_FOUND / PERMISSION_DENIED
// naming the file when it cannot be read; INVALID_ARGUMENT when the file is
// empty. Only main() should call this (it reads the environment).
absl::StatusOr<std::string> LoadAuthToken(const std::string& token_file);

// A fresh random token (32 hex digits) for a new job.
std::string NewAuthToken();

void SetDefaultAuthToken(const std::string& token);
const std::string& DefaultAuthToken();

// Server side: OK when `token` is empty or the call carries it; else
// UNAUTHENTICATED saying how to pass it.
// Takes the base of both the sync and the callback API's contexts.
grpc::Status CheckCallToken(const grpc::ServerContextBase& ctx, const std::string& token);

// Client side: adds `token` to every call's initial metadata.
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> MakeTokenSender(
    const std::string& token);

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_AUTH_H_
