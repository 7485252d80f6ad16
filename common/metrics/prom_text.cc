#include "common/metrics/prom_text.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem {
namespace {

bool NameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == ':'; }

bool ParseValue(absl::string_view text, double* v) {
  if (text == "+Inf" || text == "Inf") {
    *v = std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "-Inf") {
    *v = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "NaN") {
    *v = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  return absl::SimpleAtod(text, v);
}

}  // namespace

absl::StatusOr<std::vector<PromSample>> ParsePromText(absl::string_view text) {
  std::vector<PromSample> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](const char* what) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics text line ", line_no, ": ", what, ": '", line, "'"));
    };
    PromSample s;
    size_t i = 0;
    while (i < line.size() && NameChar(line[i])) ++i;
    if (i == 0) return bad("expected a metric name");
    s.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        const size_t k0 = i;
        while (i < line.size() && NameChar(line[i])) ++i;
        if (i == k0 || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          return bad("expected label=\"value\"");
        }
        const std::string key(line.substr(k0, i - k0));
        i += 2;
        std::string value;
        bool closed = false;
        for (; i < line.size(); ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char e = line[++i];
            value += e == 'n' ? '\n' : e;
          } else if (line[i] == '"') {
            closed = true;
            ++i;
            break;
          } else {
            value += line[i];
          }
        }
        if (!closed) return bad("unterminated label value");
        s.labels[key] = std::move(value);
      }
    }
    std::vector<absl::string_view> rest =
        absl::StrSplit(line.substr(i), ' ', absl::SkipWhitespace());
    if (rest.empty() || rest.size() > 2) return bad("expected a value (and optional timestamp)");
    if (!ParseValue(rest[0], &s.value)) return bad("value is not a number");
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

bool Matches(const PromSample& s, const std::string& name,
             const std::map<std::string, std::string>& match) {
  if (s.name != name) return false;
  for (const auto& [k, v] : match) {
    auto it = s.labels.find(k);
    if (it == s.labels.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

double SumOf(const std::vector<PromSample>& samples, const std::string& name,
             const std::map<std::string, std::string>& match) {
  double sum = 0;
  for (const PromSample& s : samples) {
    if (Matches(s, name, match)) sum += s.value;
  }
  return sum;
}

std::optional<PromSample> FindSample(const std::vector<PromSample>& samples,
                                     const std::string& name,
                                     const std::map<std::string, std::string>& match) {
  for (const PromSample& s : samples) {
    if (Matches(s, name, match)) return s;
  }
  return std::nullopt;
}

}  // namespace tandem
