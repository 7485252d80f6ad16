#include "tools/tandem/args.h"

#include <algorithm>

namespace tandem {
namespace cli {

std::vector<std::string> NormalizeFlagArgs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  bool rest = false;
  for (const std::string& a : args) {
    if (rest || a.size() < 3 || a[0] != '-' || a[1] != '-') {
      rest = rest || a == "--";
      out.push_back(a);
      continue;
    }
    std::string s = a;
    const size_t end = std::min(s.find('='), s.size());
    std::replace(s.begin() + 2, s.begin() + end, '-', '_');
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cli
}  // namespace tandem
