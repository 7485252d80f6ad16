#include "common/metrics/prom_text.h"

#include <cmath>

#include "common/metrics/metrics.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(PromTextTest, ParsesWhatOurOwnRegistryServes) {
  MetricsOptions o;
  o.port = -1;
  o.labels = {{"job", "j\"1"}, {"service", "worker"}};
  auto m = Metrics::Create(o);
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = (*m)->Counter("tandem_step_phase_seconds_total", "phases", {{"phase", "comm_wait"}});
  ASSERT_TRUE(c.ok());
  (*c)->Increment(2.5);
  auto h = (*m)->Histogram("tandem_step_seconds", "steps", {0.1, 1});
  ASSERT_TRUE(h.ok());
  (*h)->Observe(0.5);
  auto s = ParsePromText((*m)->Scrape());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(SumOf(*s, "tandem_step_phase_seconds_total", {{"phase", "comm_wait"}}), 2.5);
  EXPECT_DOUBLE_EQ(SumOf(*s, "tandem_step_phase_seconds_total", {{"phase", "forward"}}), 0);
  auto count = FindSample(*s, "tandem_step_seconds_count");
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(count->value, 1);
  EXPECT_EQ(count->labels.at("job"), "j\"1");  // escaped quote read back
  auto inf = FindSample(*s, "tandem_step_seconds_bucket", {{"le", "+Inf"}});
  ASSERT_TRUE(inf.has_value());
  EXPECT_EQ(inf->value, 1);
}

TEST(PromTextTest, ValuesTimestampsAndErrors) {
  auto s = ParsePromText("# HELP x y\na 1 1700000000\nb{k=\"v\"} +Inf\nc NaN\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].value, 1);
  EXPECT_TRUE(std::isinf((*s)[1].value));
  EXPECT_TRUE(std::isnan((*s)[2].value));
  auto bad = ParsePromText("ok 1\nbroken{k=v} 1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParsePromText("x one\n").ok());
  EXPECT_FALSE(ParsePromText("x{k=\"v 1\n").ok());
}

}  // namespace
}  // namespace tandem
