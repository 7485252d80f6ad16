#include "common/flags/usage.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace flags {
namespace {

// Flags defined in this repository (services/…, common/…), not Abseil's.
bool DefinedByTandem(absl::string_view file) { return !absl::StrContains(file, "absl/"); }

}  // namespace

void InstallFlagUsage(const char* usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = DefinedByTandem;
  config.contains_helpshort_flags = DefinedByTandem;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace flags
}  // namespace tandem
