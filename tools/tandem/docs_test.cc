// The documentation against the code: every flag `tandem local` and `tandem
// status` parse is in docs/user-guide.md, the user guide's local-flag table
// lists exactly those flags, its worker-flag table exactly the flags the
// worker's main.cc defines, its metrics table (the only one) exactly the
// metrics the binaries register, every flag README.md names exists, and
// every link in README.md and docs/ points at a file in the repository.
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tools/tandem/commands.h"

namespace tandem {
namespace cli {
namespace {

std::string Runfile(const std::string& path) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/tandem/" + path;
}

std::string Read(const std::string& path) {
  std::ifstream in(Runfile(path));
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::set<std::string> FlagNames(const FlagTable& t) {
  std::set<std::string> out;
  for (const FlagTable::Flag& f : t.flags()) out.insert(f.name);
  return out;
}

// "--batch-size" and "--batch_size" alike, for every --name in `text`.
std::set<std::string> MentionedFlags(const std::string& text) {
  std::set<std::string> out;
  const std::regex flag("(^|[^-\\w])--([a-z][a-z0-9_-]*)");
  for (std::sregex_iterator it(text.begin(), text.end(), flag), end; it != end; ++it) {
    out.insert(absl::StrReplaceAll((*it)[2].str(), {{"-", "_"}}));
  }
  return out;
}

TEST(DocsTest, UserGuideListsEveryLocalStatusAndPlanFlag) {
  const std::string guide = Read("docs/user-guide.md");
  LocalOptions local;
  StatusOptions status;
  PlanOptions plan;
  DoctorCliOptions doctor;
  AddWorkerCliOptions add_worker;
  ConvertCliOptions convert;
  TraceCliOptions trace;
  for (const FlagTable& t : {LocalFlags(&local), StatusFlags(&status), PlanFlags(&plan),
                             DoctorFlags(&doctor), AddWorkerFlags(&add_worker),
                             ConvertFlags(&convert), TraceFlags(&trace)}) {
    for (const std::string& name : FlagNames(t)) {
      EXPECT_TRUE(absl::StrContains(guide, "| `--" + name + "` |"))
          << t.command() << " --" << name << " is not in docs/user-guide.md";
    }
  }
}

TEST(DocsTest, UserGuideLocalTableHasNoFlagTandemLocalLacks) {
  const std::string guide = Read("docs/user-guide.md");
  const size_t begin = guide.find("## `tandem local` flags");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = guide.find("\n## ", begin + 1);
  const std::string section = guide.substr(begin, end - begin);
  LocalOptions local;
  const std::set<std::string> real = FlagNames(LocalFlags(&local));
  const std::regex row("\\| `--([a-z0-9_]+)` \\|");
  int rows = 0;
  for (std::sregex_iterator it(section.begin(), section.end(), row), e; it != e; ++it) {
    ++rows;
    EXPECT_EQ(real.count((*it)[1].str()), 1u) << "--" << (*it)[1].str();
  }
  EXPECT_EQ(rows, static_cast<int>(real.size()));
}

// The user guide's section that starts with `heading` (up to the next "## ").
std::string Section(const std::string& doc, const std::string& heading) {
  const size_t begin = doc.find("\n" + heading + "\n");
  EXPECT_NE(begin, std::string::npos) << heading;
  if (begin == std::string::npos) return "";
  const size_t end = doc.find("\n## ", begin + 1);
  return doc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// Every `pattern` match's group 1 in the first cell of each table row
// ("| `--a`, `--b` | ..." gives a and b).
std::set<std::string> FirstCellNames(const std::string& section, const std::string& pattern) {
  std::set<std::string> out;
  const std::regex row("\n\\| ([^|]*) \\|");
  const std::regex name(pattern);
  for (std::sregex_iterator it(section.begin(), section.end(), row), e; it != e; ++it) {
    const std::string cell = (*it)[1].str();
    for (std::sregex_iterator n(cell.begin(), cell.end(), name), ne; n != ne; ++n) {
      out.insert((*n)[1].str());
    }
  }
  return out;
}

// Group 1 of every `pattern` match in the given source files.
std::set<std::string> NamesInSources(const std::vector<std::string>& files,
                                     const std::string& pattern) {
  std::set<std::string> out;
  const std::regex re(pattern);
  for (const std::string& f : files) {
    const std::string text = Read(f);
    int found = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), re), e; it != e; ++it, ++found) {
      out.insert((*it)[1].str());
    }
    EXPECT_GT(found, 0) << f << " defines none: has the pattern changed?";
  }
  return out;
}

TEST(DocsTest, WorkerFlagTableListsExactlyTheWorkersFlags) {
  const std::set<std::string> defined = NamesInSources(
      {"services/worker/main.cc", "common/rpc/tls_flags.h", "common/trace/trace_flags.h"},
      "ABSL_FLAG\\(\\s*[^,]+,\\s*([a-z0-9_]+)\\s*,");
  const std::set<std::string> documented =
      FirstCellNames(Section(Read("docs/user-guide.md"), "## Worker flags"), "`--([a-z0-9_]+)`");
  for (const std::string& f : defined) {
    EXPECT_EQ(documented.count(f), 1u) << "worker --" << f << " is not in the worker flag table";
  }
  for (const std::string& f : documented) {
    EXPECT_EQ(defined.count(f), 1u) << "the worker flag table lists --" << f
                                    << ", which the worker does not define";
  }
}

// The metrics every binary registers (common/metrics' Counter / Gauge /
// Histogram with a literal name: the only way tandem registers one).
TEST(DocsTest, MetricsTableListsExactlyTheRegisteredMetrics) {
  const std::set<std::string> registered = NamesInSources(
      {"services/worker/worker_metrics.cc", "services/worker/background_checkpoint.cc",
       "common/data/prefetch_client.cc",
       "services/dataserver/server_metrics.cc", "services/coordinator/coordinator_server.cc",
       "services/shardserver/shard_metrics.cc"},
      "(?:Counter|Gauge|Histogram)\\(\\s*\"(tandem_[a-z0-9_]+)\"");
  const std::set<std::string> documented =
      FirstCellNames(Section(Read("docs/user-guide.md"), "## Metrics"), "`(tandem_[a-z0-9_]+)");
  EXPECT_GT(registered.size(), 40u);
  for (const std::string& m : registered) {
    EXPECT_EQ(documented.count(m), 1u) << m << " is not in the user guide's metrics table";
  }
  for (const std::string& m : documented) {
    EXPECT_EQ(registered.count(m), 1u) << "the metrics table lists " << m
                                       << ", which no binary registers";
  }
  // One table: architecture.md points at it instead of keeping a copy.
  EXPECT_FALSE(absl::StrContains(Read("docs/architecture.md"), "| `tandem_step_seconds`"));
}

TEST(DocsTest, EveryFlagTheReadmeNamesExists) {
  LocalOptions local;
  StatusOptions status;
  PlanOptions plan;
  std::set<std::string> known = FlagNames(LocalFlags(&local));
  for (const std::string& n : FlagNames(StatusFlags(&status))) known.insert(n);
  for (const std::string& n : FlagNames(PlanFlags(&plan))) known.insert(n);
  DoctorCliOptions doctor;
  for (const std::string& n : FlagNames(DoctorFlags(&doctor))) known.insert(n);
  AddWorkerCliOptions add_worker;
  for (const std::string& n : FlagNames(AddWorkerFlags(&add_worker))) known.insert(n);
  known.insert("help");
  known.insert("bench");  // tools/setup.sh --bench
  const std::set<std::string> mentioned = MentionedFlags(Read("README.md"));
  EXPECT_GT(mentioned.size(), 8u);
  for (const std::string& name : mentioned) {
    EXPECT_EQ(known.count(name), 1u) << "README.md names --" << name << ", which nothing parses";
  }
}

// One spelling per flag: help and errors use underscores, so does the
// README (the parser takes dashes too, but a reader should see one form).
TEST(DocsTest, TheReadmeSpellsEveryFlagWithUnderscores) {
  const std::string readme = Read("README.md");
  const std::regex flag("(^|[^-\\w])--([a-z][a-z0-9_-]*)");
  int flags = 0;
  for (std::sregex_iterator it(readme.begin(), readme.end(), flag), end; it != end; ++it) {
    ++flags;
    EXPECT_FALSE(absl::StrContains((*it)[2].str(), "-"))
        << "README.md spells --" << (*it)[2].str() << "; write --"
        << absl::StrReplaceAll((*it)[2].str(), {{"-", "_"}});
  }
  EXPECT_GT(flags, 8);
}

// The words of every `tandem plan ...` example in `text`: inline code up to
// its closing backtick (across a line break), a code block's line with its
// backslash continuations.
std::vector<std::vector<std::string>> PlanExamples(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  const std::string start = "tandem plan";
  for (size_t at = text.find(start); at != std::string::npos; at = text.find(start, at + 1)) {
    const size_t after = at + start.size();
    if (after >= text.size() || (text[after] != ' ' && text[after] != '\n')) continue;
    const bool inline_code = at > 0 && text[at - 1] == '`';
    const size_t line = text.rfind('\n', at) + 1;  // npos + 1 = 0
    const bool block = text.find_first_not_of(' ', line) == at && at - line >= 4;
    if (!inline_code && !block) continue;  // prose that names the command
    size_t end = inline_code ? text.find('`', at) : at;
    while (!inline_code) {
      end = text.find('\n', end);
      if (end == std::string::npos || end == 0 || text[end - 1] != '\\') break;
      ++end;
    }
    std::string example = text.substr(at + start.size(), end - at - start.size());
    example = absl::StrReplaceAll(example, {{"\\\n", " "}, {"\n", " "}});
    if (const size_t hash = example.find(" #"); hash != std::string::npos) example.resize(hash);
    std::vector<std::string> words = {"plan"};
    for (absl::string_view w : absl::StrSplit(example, ' ', absl::SkipEmpty())) {
      words.emplace_back(w);
    }
    out.push_back(words);
  }
  return out;
}

TEST(DocsTest, EveryTandemPlanExampleParsesWithItsFlagsSpelledOneWay) {
  int examples = 0;
  for (const std::string doc : {"README.md", "docs/user-guide.md"}) {
    for (const std::vector<std::string>& words : PlanExamples(Read(doc))) {
      ++examples;
      auto parsed = ParseCommandLine(words);
      EXPECT_TRUE(parsed.ok()) << doc << ": tandem plan example " << absl::StrJoin(words, " ")
                               << ": " << parsed.status();
      PlanOptions plan;
      const FlagTable table = PlanFlags(&plan);
      for (const std::string& w : words) {
        if (!absl::StartsWith(w, "--")) continue;
        const std::string name = w.substr(2, w.find('=') - 2);
        const FlagTable::Flag* f = table.Find(name);
        ASSERT_NE(f, nullptr) << doc << ": " << w;
        EXPECT_EQ(f->name, name) << doc << ": write --" << f->name << ", not " << w;
      }
    }
  }
  EXPECT_GE(examples, 4);
}

TEST(DocsTest, LinksStayInsideTheRepository) {
  const std::regex link("\\]\\(([^)#\\s]+)(#[^)]*)?\\)");
  for (const std::string& doc : {"README.md", "docs/architecture.md", "docs/user-guide.md"}) {
    const std::string text = Read(doc);
    const std::string dir = doc.find('/') == std::string::npos ? "" : doc.substr(0, doc.rfind('/') + 1);
    int links = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), link), e; it != e; ++it) {
      const std::string target = (*it)[1].str();
      ++links;
      EXPECT_FALSE(absl::StartsWith(target, "../") || absl::StartsWith(target, "/") ||
                   absl::StrContains(target, "://"))
          << doc << " links outside the repository: " << target;
      std::ifstream in(Runfile(dir + target));
      EXPECT_TRUE(in.good()) << doc << " links to a missing file: " << target;
    }
    if (doc == "README.md") EXPECT_GE(links, 2) << "README links the docs";
  }
}

}  // namespace
}  // namespace cli
}  // namespace tandem
