// Status plumbing for tandem: absl::Status / absl::StatusOr plus the two
// macros abseil 20220623 lacks.
//
//   absl::Status Load(const std::string& path) {
//     RETURN_IF_ERROR(CheckExists(path));
//     ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
//     ...
//   }
//
// Errors cross every module boundary as absl::Status; nothing on the training
// path throws. Conversions to and from gRPC status live in common/rpc only.
#ifndef TANDEM_COMMON_STATUS_STATUS_MACROS_H_
#define TANDEM_COMMON_STATUS_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TANDEM_STATUS_CONCAT_INNER_(a, b) a##b
#define TANDEM_STATUS_CONCAT_(a, b) TANDEM_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) once; returns it from the enclosing
// function if it is not OK.
#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    ::absl::Status tandem_status_ = (expr);                     \
    if (!tandem_status_.ok()) return tandem_status_;            \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the enclosing function, otherwise moves the value into `lhs`, which may be a
// declaration ("auto x") or an existing variable.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(     \
      TANDEM_STATUS_CONCAT_(tandem_statusor_, __LINE__), lhs, rexpr)

#define TANDEM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

namespace tandem {

// Prefixes a non-OK status's message with `context` ("loading checkpoint
// /x: "), keeping its code; OK passes through.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace tandem

#endif  // TANDEM_COMMON_STATUS_STATUS_MACROS_H_
