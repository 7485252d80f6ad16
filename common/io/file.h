// Whole-file I/O with the durability tandem's state needs.
//
// WriteFileAtomically writes `contents` to a temporary file next to `path`,
// fsyncs it, renames it over `path` and fsyncs the directory: a reader sees
// the old file or the new one, never a torn one, even after a crash.
// Errors name the path and the failing system call. Thread-compatible.
#ifndef TANDEM_COMMON_IO_FILE_H_
#define TANDEM_COMMON_IO_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// NOT_FOUND when the file does not exist.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Creates `dir` and its parents (like mkdir -p).
absl::Status MakeDirectories(const std::string& dir);

}  // namespace tandem

#endif  // TANDEM_COMMON_IO_FILE_H_
