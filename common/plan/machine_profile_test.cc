#include "common/plan/machine_profile.h"

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

TEST(MachineProfileTest, FormatParsesBackToTheSameProfile) {
  MachineProfile p;
  p.gemm_flops_per_s = 57.5e9;
  p.stream_bytes_per_s = 31e9;
  p.cores = 2;
  p.source = "measured on test";
  auto back = ParseMachineProfile(FormatMachineProfile(p), "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->gemm_flops_per_s, 57.5e9);
  EXPECT_DOUBLE_EQ(back->stream_bytes_per_s, 31e9);
  EXPECT_DOUBLE_EQ(back->link_alpha_s, p.link_alpha_s);
  EXPECT_EQ(back->cores, 2);
  EXPECT_EQ(back->source, "measured on test");
}

TEST(MachineProfileTest, BadLinesNameFileLineAndKey) {
  auto unknown = ParseMachineProfile("# c\ngemm_flops_per_s = 1e9\nwarp = 9\n", "p.txt");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("p.txt:3: unknown key 'warp'"), std::string::npos)
      << unknown.status();
  auto negative = ParseMachineProfile("stream_bytes_per_s = -3\n", "p.txt");
  EXPECT_NE(negative.status().message().find("must be a positive number"), std::string::npos);
  auto garbled = ParseMachineProfile("just words\n", "p.txt");
  EXPECT_NE(garbled.status().message().find("expected `key = value`"), std::string::npos);
  EXPECT_EQ(LoadMachineProfile("/nonexistent/tandem/profile").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MachineProfileTest, ClusterChecks) {
  Cluster c;
  EXPECT_TRUE(ValidateCluster(c).ok());
  c.nodes = 0;
  EXPECT_FALSE(ValidateCluster(c).ok());
  c = Cluster{};
  c.servers = -1;
  EXPECT_FALSE(ValidateCluster(c).ok());
}

}  // namespace
}  // namespace plan
}  // namespace tandem
