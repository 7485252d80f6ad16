#include "tools/tandem/flag_table.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace cli {
namespace {

constexpr size_t kNameColumn = 34;  // "  --data_root=/usr/share/datasets  "

std::string Underscores(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// Edit distance, for "did you mean".
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

absl::Status BadValue(const std::string& name, const std::string& value, const char* expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, "=", value, " is not ", expected));
}

// Parses into a temporary so that a bad value leaves the field as it was.
template <typename T>
bool Store(const std::string& text, T* field) {
  T value{};
  bool ok = false;
  if constexpr (std::is_floating_point_v<T>) {
    ok = absl::SimpleAtod(text, &value);
  } else {
    ok = absl::SimpleAtoi(text, &value);
  }
  if (ok) *field = value;
  return ok;
}

}  // namespace

FlagTable::FlagTable(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void FlagTable::Section(std::string title) { section_ = std::move(title); }

void FlagTable::Add(const std::string& name, bool is_bool, std::string default_text,
                    std::string meaning, std::function<absl::Status(const std::string&)> set) {
  Flag f;
  f.name = Underscores(name);
  f.is_bool = is_bool;
  f.default_text = std::move(default_text);
  f.meaning = std::move(meaning);
  f.section = section_;
  f.set = std::move(set);
  flags_.push_back(std::move(f));
}

void FlagTable::Int(const std::string& name, int* field, std::string meaning) {
  Add(name, false, absl::StrCat(*field), std::move(meaning), [=](const std::string& v) {
    return Store(v, field) ? absl::OkStatus() : BadValue(name, v, "an integer");
  });
}

void FlagTable::Int64(const std::string& name, int64_t* field, std::string meaning) {
  Add(name, false, absl::StrCat(*field), std::move(meaning), [=](const std::string& v) {
    return Store(v, field) ? absl::OkStatus() : BadValue(name, v, "an integer");
  });
}

void FlagTable::Double(const std::string& name, double* field, std::string meaning) {
  Add(name, false, absl::StrCat(*field), std::move(meaning), [=](const std::string& v) {
    return Store(v, field) ? absl::OkStatus() : BadValue(name, v, "a number");
  });
}

void FlagTable::String(const std::string& name, std::string* field, std::string meaning) {
  Add(name, false, *field, std::move(meaning), [=](const std::string& v) {
    *field = v;
    return absl::OkStatus();
  });
}

void FlagTable::Bool(const std::string& name, bool* field, std::string meaning) {
  Add(name, true, *field ? "true" : "false", std::move(meaning), [=](const std::string& v) {
    const std::string lower = absl::AsciiStrToLower(v);
    if (lower == "true" || lower == "1" || lower == "yes") {
      *field = true;
    } else if (lower == "false" || lower == "0" || lower == "no") {
      *field = false;
    } else {
      return BadValue(name, v, "true or false");
    }
    return absl::OkStatus();
  });
}

void FlagTable::StringList(const std::string& name, std::vector<std::string>* field,
                           std::string meaning) {
  std::string default_text;
  for (const std::string& s : *field) absl::StrAppend(&default_text, default_text.empty() ? "" : ",", s);
  Add(name, false, default_text, std::move(meaning), [=](const std::string& v) {
    for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      field->emplace_back(part);
    }
    return absl::OkStatus();
  });
}

void FlagTable::Seconds(const std::string& name, absl::Duration* field, std::string meaning) {
  Add(name, false, absl::StrCat(absl::ToDoubleSeconds(*field)), std::move(meaning),
      [=](const std::string& v) {
        double seconds = 0;
        if (!absl::SimpleAtod(v, &seconds) || !(seconds >= 0)) {
          return BadValue(name, v, "a number of seconds >= 0");
        }
        *field = absl::Seconds(seconds);
        return absl::OkStatus();
      });
}

void FlagTable::Alias(const std::string& old_name, const std::string& name) {
  for (Flag& f : flags_) {
    if (f.name != name) continue;
    aliases_.push_back({old_name, name});
    absl::StrAppend(&f.meaning, " (also --", old_name, ")");
    return;
  }
}

const FlagTable::Flag* FlagTable::Find(const std::string& name) const {
  std::string key = Underscores(name);
  for (const auto& [old_name, canonical] : aliases_) {
    if (key == old_name) key = canonical;
  }
  for (const Flag& f : flags_) {
    if (f.name == key) return &f;
  }
  return nullptr;
}

absl::Status FlagTable::Unknown(const std::string& name) const {
  const std::string key = Underscores(name);
  const Flag* best = nullptr;
  size_t best_distance = 3;  // suggest only close names
  for (const Flag& f : flags_) {
    const size_t d = Distance(key, f.name);
    if (d < best_distance) {
      best_distance = d;
      best = &f;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown flag --", name, " for `", command_, "`",
                   best != nullptr ? absl::StrCat(" (did you mean --", best->name, "?)") : "",
                   "; run `", command_, " --help` for its flags"));
}

absl::StatusOr<FlagTable::Parsed> FlagTable::Parse(const std::vector<std::string>& args) const {
  Parsed out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.positionals.insert(out.positionals.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (a == "-h" || a == "--help" || a == "-help") {
      out.help = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || a == "-") {
      out.positionals.push_back(a);
      continue;
    }
    // "-name" is accepted like "--name" (as absl and gflags do).
    const std::string body = a.substr(a[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string name = body.substr(0, eq);
    const Flag* f = Find(name);
    if (f == nullptr && eq == std::string::npos && name.size() > 2 && name.rfind("no", 0) == 0) {
      const Flag* negated = Find(name.substr(2));
      if (negated != nullptr && negated->is_bool) {
        RETURN_IF_ERROR(negated->set("false"));
        out.given.push_back(negated->name);
        continue;
      }
    }
    if (f == nullptr) return Unknown(name);
    std::string value;
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (f->is_bool) {
      value = "true";
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", f->name, " needs a value (--", f->name, "=VALUE); run `", command_, " --help`"));
    }
    if (absl::Status s = f->set(value); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(), "; run `", command_, " --help`"));
    }
    out.given.push_back(f->name);
  }
  return out;
}

bool FlagTable::Parsed::Given(const std::string& name) const {
  for (const std::string& g : given) {
    if (g == name) return true;
  }
  return false;
}

std::string FlagTable::Help() const {
  std::string out = absl::StrCat("usage: ", command_, " [--flag=value ...]\n", summary_, "\n");
  if (flags_.empty()) return out;
  absl::StrAppend(&out,
                  "\nFlags take --name=value or --name value (dashes or underscores); "
                  "shown with their defaults.\n");
  std::string section = "\x01";  // differs from every real heading
  for (const Flag& f : flags_) {
    if (f.section != section) {
      section = f.section;
      absl::StrAppend(&out, "\n", section.empty() ? "flags" : section, ":\n");
    }
    std::string left = absl::StrCat("  --", f.name, "=",
                                    f.default_text.empty() ? "\"\"" : f.default_text);
    if (left.size() + 2 > kNameColumn) {
      absl::StrAppend(&out, left, "\n", std::string(kNameColumn, ' '), f.meaning, "\n");
    } else {
      left.resize(kNameColumn, ' ');
      absl::StrAppend(&out, left, f.meaning, "\n");
    }
  }
  return out;
}

}  // namespace cli
}  // namespace tandem
