#include "tools/tandem/args.h"

#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

using Args = std::vector<std::string>;

TEST(NormalizeFlagArgsTest, DashesInNamesBecomeUnderscores) {
  EXPECT_EQ(NormalizeFlagArgs({"--batch-size=64", "--bin-dir", "/a-b/c-d"}),
            (Args{"--batch_size=64", "--bin_dir", "/a-b/c-d"}));
}

TEST(NormalizeFlagArgsTest, ValuesAndPositionalsUntouched) {
  EXPECT_EQ(NormalizeFlagArgs({"local", "--model=mlp:784,10", "--run-dir=/tmp/x-y", "-v"}),
            (Args{"local", "--model=mlp:784,10", "--run_dir=/tmp/x-y", "-v"}));
}

TEST(NormalizeFlagArgsTest, UnderscoresAlreadyFineAndEverythingAfterDoubleDashKept) {
  EXPECT_EQ(NormalizeFlagArgs({"--batch_size=1", "--", "--keep-me"}),
            (Args{"--batch_size=1", "--", "--keep-me"}));
  EXPECT_EQ(NormalizeFlagArgs({}), Args{});
  EXPECT_EQ(NormalizeFlagArgs({"--"}), Args{"--"});
}

}  // namespace
}  // namespace cli
}  // namespace tandem
