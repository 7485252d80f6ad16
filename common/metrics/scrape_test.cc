#include "common/metrics/scrape.h"

#include "common/metrics/metrics.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(ScrapeTest, FetchesWhatTheExposerServes) {
  MetricsOptions o;
  o.port = 0;
  auto m = Metrics::Create(o);
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = (*m)->Counter("tandem_samples_total", "samples");
  ASSERT_TRUE(c.ok());
  (*c)->Increment(42);
  const std::string addr = "127.0.0.1:" + std::to_string((*m)->port());
  auto text = ScrapeMetrics(addr, absl::Seconds(5));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, (*m)->Scrape());
  auto url = ScrapeMetrics("http://" + addr + "/metrics", absl::Seconds(5));
  ASSERT_TRUE(url.ok()) << url.status();
  // A path the exposer does not serve is not mistaken for metrics.
  auto other = ScrapeMetrics("http://" + addr + "/other", absl::Seconds(5));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnavailable) << other.status();
}

TEST(ScrapeTest, BadAddressesAreClearErrors) {
  EXPECT_EQ(ScrapeMetrics("no-port", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScrapeMetrics("127.0.0.1:0", absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing listens on port 1 here.
  auto refused = ScrapeMetrics("127.0.0.1:1", absl::Seconds(1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace tandem
