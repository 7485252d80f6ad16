// Flag help for tandem's service binaries. Abseil's --help lists only flags
// defined in a file named after the program (coordinator.cc, …); tandem's
// flags live in each service's main.cc, so a plain --help printed "No flags
// matched". InstallFlagUsage sets the usage line and makes --help and
// --helpshort list every flag tandem defines (Abseil's own are left to
// --helpfull).
//
//   int main(int argc, char** argv) {
//     tandem::flags::InstallFlagUsage("tandem coordinator: …");
//     absl::ParseCommandLine(argc, argv);
//
// Call once, before ParseCommandLine. Not thread-safe (start-up only).
#ifndef TANDEM_COMMON_FLAGS_USAGE_H_
#define TANDEM_COMMON_FLAGS_USAGE_H_

namespace tandem {
namespace flags {

void InstallFlagUsage(const char* usage);

}  // namespace flags
}  // namespace tandem

#endif  // TANDEM_COMMON_FLAGS_USAGE_H_
