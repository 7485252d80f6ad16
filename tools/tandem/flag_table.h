// FlagTable: one command's flags in one table — name, default, a one-line
// meaning and the field the value goes to — from which both the parser and
// the command's --help text are generated, so the two cannot drift apart.
//
//   LocalOptions o;                                   // defaults live in the struct
//   FlagTable t("tandem local", "Train on processes on this machine.");
//   t.Int("workers", &o.workers, "Worker processes to start.");
//   ASSIGN_OR_RETURN(FlagTable::Parsed p, t.Parse(args));   // writes into o
//   if (p.help) std::fputs(t.Help().c_str(), stdout);
//
// The default shown by Help() is the field's value when the flag was added.
// Syntax: --name=value or --name value; booleans also --name and --noname;
// dashes and underscores in a name are the same (--batch-size = --batch_size);
// a list flag takes comma-separated values and may be repeated. -h / --help
// ask for help; a bare "--" ends the flags (the rest are positionals).
// Errors (INVALID_ARGUMENT): an unknown flag (named, with the closest known
// one when there is one, and a pointer to `<command> --help`), a missing or
// unparsable value, a value given to a boolean that is not true/false.
// Ownership: the table keeps pointers to the fields, which must outlive it.
// Not thread-safe.
#ifndef TANDEM_TOOLS_TANDEM_FLAG_TABLE_H_
#define TANDEM_TOOLS_TANDEM_FLAG_TABLE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {
namespace cli {

class FlagTable {
 public:
  struct Flag {
    std::string name;          // with underscores, no leading dashes
    bool is_bool = false;      // takes no value: --name, --noname, --name=false
    std::string default_text;  // as the field was when added
    std::string meaning;       // one line
    std::string section;       // the heading it is listed under
    std::function<absl::Status(const std::string&)> set;
  };
  struct Parsed {
    bool help = false;
    std::vector<std::string> positionals;
    // Flags the arguments named (canonical names, underscores), in order:
    // for checks that depend on whether a flag was given, not its value.
    std::vector<std::string> given;
    bool Given(const std::string& name) const;
  };

  // `command` as the user types it ("tandem local"); `summary` one line.
  FlagTable(std::string command, std::string summary);

  // Flags added after this are listed under `title` in Help().
  void Section(std::string title);
  void Int(const std::string& name, int* field, std::string meaning);
  void Int64(const std::string& name, int64_t* field, std::string meaning);
  void Double(const std::string& name, double* field, std::string meaning);
  void String(const std::string& name, std::string* field, std::string meaning);
  void Bool(const std::string& name, bool* field, std::string meaning);
  // Comma-separated; each occurrence appends.
  void StringList(const std::string& name, std::vector<std::string>* field, std::string meaning);
  // A number of seconds (may be fractional).
  void Seconds(const std::string& name, absl::Duration* field, std::string meaning);
  // Accepts --old_name for the flag `name` (added before): a renamed flag
  // keeps working. Help lists `name` only, with "(also --old_name)".
  void Alias(const std::string& old_name, const std::string& name);

  // Parses `args` (the words after the command) into the fields.
  absl::StatusOr<Parsed> Parse(const std::vector<std::string>& args) const;

  // "usage: ..., the summary, then one line per flag: --name=DEFAULT  meaning".
  std::string Help() const;

  const std::vector<Flag>& flags() const { return flags_; }
  const Flag* Find(const std::string& name) const;  // dashes or underscores
  const std::string& command() const { return command_; }
  const std::string& summary() const { return summary_; }

 private:
  void Add(const std::string& name, bool is_bool, std::string default_text,
           std::string meaning, std::function<absl::Status(const std::string&)> set);
  absl::Status Unknown(const std::string& name) const;

  std::string command_;
  std::string summary_;
  std::string section_;
  std::vector<Flag> flags_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // old -> name
};

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_FLAG_TABLE_H_
