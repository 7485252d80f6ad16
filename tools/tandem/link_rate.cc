#include "tools/tandem/link_rate.h"

#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace cli {

absl::StatusOr<int64_t> ParseLinkRate(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--link '", text, "' is not a link rate (", why,
        "); use a number and a unit of bits per second, e.g. 10gbit, 1gbit, 100mbit, 512kbit"));
  };
  const std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t split = 0;
  while (split < t.size() && (std::isdigit(static_cast<unsigned char>(t[split])) || t[split] == '.')) {
    ++split;
  }
  if (split == 0) return bad("no number");
  const std::string unit = t.substr(split);
  double number = 0;
  if (!absl::SimpleAtod(t.substr(0, split), &number)) return bad("bad number");
  double scale = 0;
  if (unit == "bit") scale = 1;
  else if (unit == "kbit") scale = 1e3;
  else if (unit == "mbit") scale = 1e6;
  else if (unit == "gbit") scale = 1e9;
  else if (unit == "tbit") scale = 1e12;
  else return bad(unit.empty() ? "no unit" : absl::StrCat("unknown unit '", unit, "'"));
  const double bps = number * scale;
  if (!(bps >= 8e3)) return bad("below 8kbit");
  if (bps > 1e12) return bad("above 1tbit");
  return static_cast<int64_t>(std::llround(bps));
}

std::string FormatLinkRate(int64_t bps) {
  struct Unit {
    int64_t scale;
    const char* name;
  };
  for (const Unit& u : {Unit{1000000000000LL, "tbit"}, Unit{1000000000, "gbit"},
                        Unit{1000000, "mbit"}, Unit{1000, "kbit"}}) {
    if (bps >= u.scale && bps % u.scale == 0) return absl::StrCat(bps / u.scale, u.name);
  }
  return absl::StrCat(bps, "bit");
}

}  // namespace cli
}  // namespace tandem
