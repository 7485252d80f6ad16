// Link rates as `tandem local --link` takes them: a number and a tc-style
// unit of bits per second, e.g. "10gbit", "1gbit", "100mbit", "512kbit",
// "2.5gbit" (units bit, kbit, mbit, gbit, tbit; case-insensitive; k = 1000).
//
//   ASSIGN_OR_RETURN(int64_t bps, ParseLinkRate("100mbit"));   // 100000000
//   FormatLinkRate(bps);                                         // "100mbit"
//
// Pure functions, thread-safe. A bad rate is INVALID_ARGUMENT naming the
// text and giving examples.
#ifndef TANDEM_TOOLS_TANDEM_LINK_RATE_H_
#define TANDEM_TOOLS_TANDEM_LINK_RATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {
namespace cli {

// Bits per second; at least 8 kbit/s (htb's floor is about that), at most 1 tbit/s.
absl::StatusOr<int64_t> ParseLinkRate(const std::string& text);

// The shortest exact spelling ("1gbit", "2500mbit", "8kbit", "12345bit").
std::string FormatLinkRate(int64_t bits_per_second);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_LINK_RATE_H_
