// Command-line spelling for the tandem CLI: `tandem <command> --flag-name=v`.
//
// The examples spell flags with dashes (--batch-size 64); absl flags
// are declared with underscores. NormalizeFlagArgs rewrites the name part of
// every "--name" / "--name=value" argument (dashes to underscores) and
// leaves values and positional arguments untouched, so both spellings work
// everywhere. Everything after a bare "--" is left as is.
//
// Thread-safe (pure functions).
#ifndef TANDEM_TOOLS_TANDEM_ARGS_H_
#define TANDEM_TOOLS_TANDEM_ARGS_H_

#include <string>
#include <vector>

namespace tandem {
namespace cli {

std::vector<std::string> NormalizeFlagArgs(const std::vector<std::string>& args);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_ARGS_H_
