#include "common/io/crc32c.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {

namespace {

// Check values from RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(dec.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Crc32cTest, FastPathMatchesPortableAtEveryLengthAndAlignment) {
  std::mt19937 rng(5);
  std::vector<uint8_t> data(300);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t start = 0; start < 9; ++start) {
    for (size_t n = 0; start + n <= data.size(); n += 7) {
      ASSERT_EQ(Crc32c(data.data() + start, n),
                internal::Crc32cExtendPortable(0, data.data() + start, n))
          << start << " " << n;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsWholeAndDetectsChanges) {
  const std::string s = "tandem checkpoints are checksummed section by section";
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    ASSERT_EQ(Crc32cExtend(Crc32c(s.data(), cut), s.data() + cut, s.size() - cut),
              Crc32c(s.data(), s.size()));
  }
  std::string t = s;
  t[10] ^= 0x01;
  EXPECT_NE(Crc32c(t.data(), t.size()), Crc32c(s.data(), s.size()));
}

}  // namespace

}  // namespace tandem
