#include "tools/tandem/flag_table.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

struct Opts {
  int n = 4;
  int64_t big = 0;
  double x = 0.5;
  std::string name = "abc";
  bool on = false;
  std::vector<std::string> list;
  absl::Duration wait = absl::Seconds(5);
};

FlagTable Table(Opts* o) {
  FlagTable t("tool run", "Runs a thing.");
  t.Section("first");
  t.Int("n", &o->n, "A count.");
  t.Int64("big_number", &o->big, "A large count.");
  t.Double("x", &o->x, "A ratio.");
  t.Section("second");
  t.String("name", &o->name, "A name.");
  t.Bool("on", &o->on, "A switch.");
  t.StringList("list", &o->list, "Some words.");
  t.Seconds("wait_seconds", &o->wait, "A wait.");
  return t;
}

TEST(FlagTableTest, ParsesEverySpelling) {
  Opts o;
  FlagTable t = Table(&o);
  auto p = t.Parse({"--n=7", "--big-number", "9000000000", "-x", "1.5", "--name=", "--on",
                    "--list=a,b", "--list", "c", "--wait_seconds=0.25", "pos", "--", "--n=1"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(o.n, 7);
  EXPECT_EQ(o.big, 9000000000);
  EXPECT_EQ(o.x, 1.5);
  EXPECT_EQ(o.name, "");
  EXPECT_TRUE(o.on);
  EXPECT_EQ(o.list, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(o.wait, absl::Milliseconds(250));
  EXPECT_FALSE(p->help);
  EXPECT_EQ(p->positionals, (std::vector<std::string>{"pos", "--n=1"}));
}

// A renamed flag keeps its old name as an alias: both set the field, help
// lists the new name only (saying the old one still works).
TEST(FlagTableTest, AnAliasSetsTheSameFlag) {
  Opts o;
  FlagTable t = Table(&o);
  t.Alias("count", "n");
  auto p = t.Parse({"--count=9"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(o.n, 9);
  EXPECT_TRUE(p->Given("n"));
  ASSERT_TRUE(t.Parse({"--n", "3"}).ok());
  EXPECT_EQ(o.n, 3);
  EXPECT_NE(t.Find("count"), nullptr);
  EXPECT_EQ(t.Find("count")->name, "n");
  const std::string help = t.Help();
  EXPECT_TRUE(absl::StrContains(help, "A count. (also --count)")) << help;
  EXPECT_FALSE(absl::StrContains(help, "--count=")) << help;
}

TEST(FlagTableTest, RecordsWhichFlagsWereGivenEvenAtTheirDefault) {
  Opts o;
  FlagTable t = Table(&o);
  auto p = t.Parse({"--n=4", "--big-number", "1", "--noon"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->given, (std::vector<std::string>{"n", "big_number", "on"}));
  EXPECT_TRUE(p->Given("n"));  // 4 is the default, but it was named
  EXPECT_FALSE(p->Given("x"));
}

TEST(FlagTableTest, BooleansTakeNoValueButAcceptOne) {
  Opts o;
  FlagTable t = Table(&o);
  ASSERT_TRUE(t.Parse({"--on", "--noon"}).ok());
  EXPECT_FALSE(o.on);
  ASSERT_TRUE(t.Parse({"--on=true"}).ok());
  EXPECT_TRUE(o.on);
  ASSERT_TRUE(t.Parse({"--on=0"}).ok());
  EXPECT_FALSE(o.on);
  auto bad = t.Parse({"--on=maybe"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "--on=maybe is not true or false"))
      << bad.status();
}

TEST(FlagTableTest, UnknownFlagIsNamedWithASuggestionAndThePointerToHelp) {
  Opts o;
  FlagTable t = Table(&o);
  auto p = t.Parse({"--nme=x"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(p.status().message(), "unknown flag --nme for `tool run`"))
      << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "did you mean --name?")) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "`tool run --help`")) << p.status();
  auto far = t.Parse({"--completely_different"});
  ASSERT_FALSE(far.ok());
  EXPECT_FALSE(absl::StrContains(far.status().message(), "did you mean")) << far.status();
}

TEST(FlagTableTest, BadOrMissingValues) {
  Opts o;
  FlagTable t = Table(&o);
  auto p = t.Parse({"--n=four"});
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "--n=four is not an integer")) << p.status();
  p = t.Parse({"--x=1.2.3"});
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "is not a number")) << p.status();
  p = t.Parse({"--wait_seconds=-1"});
  ASSERT_FALSE(p.ok());
  p = t.Parse({"--n"});
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::StrContains(p.status().message(), "--n needs a value")) << p.status();
  EXPECT_EQ(o.n, 4);  // untouched by the failures
}

TEST(FlagTableTest, HelpListsEveryFlagWithItsDefaultUnderItsSection) {
  Opts o;
  FlagTable t = Table(&o);
  ASSERT_TRUE(t.Parse({"--n=9"}).ok());  // defaults are the values when added
  const std::string help = t.Help();
  EXPECT_TRUE(absl::StartsWith(help, "usage: tool run [--flag=value ...]\nRuns a thing.\n")) << help;
  for (const char* line : {"  --n=4 ", "  --big_number=0 ", "  --x=0.5 ", "  --name=abc ",
                           "  --on=false ", "  --list=\"\" ", "  --wait_seconds=5 "}) {
    EXPECT_TRUE(absl::StrContains(help, line)) << line << " in\n" << help;
  }
  EXPECT_TRUE(absl::StrContains(help, "A large count.\n")) << help;
  EXPECT_LT(help.find("first:\n"), help.find("--n=4"));
  EXPECT_LT(help.find("--x=0.5"), help.find("second:\n"));
  EXPECT_LT(help.find("second:\n"), help.find("--name=abc"));
  for (const FlagTable::Flag& f : t.flags()) {
    EXPECT_TRUE(absl::StrContains(help, "--" + f.name + "=")) << f.name;
  }
}

TEST(FlagTableTest, HelpIsRequestedByEitherSpelling) {
  Opts o;
  FlagTable t = Table(&o);
  for (const char* h : {"--help", "-h"}) {
    auto p = t.Parse({"--n=2", h});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->help) << h;
  }
}

}  // namespace
}  // namespace cli
}  // namespace tandem
