#include "common/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// Plain HTTP/1.0 GET from 127.0.0.1:port; returns the body or "" on error.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, n);
  close(fd);
  size_t body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

MetricsOptions Local(int port) {
  MetricsOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.labels = {{"job", "test"}, {"rank", "0"}, {"service", "worker"}};
  return o;
}

TEST(Metrics, ServesScrapeThatPromtoolAccepts) {
  auto metrics = Metrics::Create(Local(0));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ASSERT_GT((*metrics)->port(), 0);
  auto steps = (*metrics)->Counter("tandem_steps_total", "Optimizer steps taken.");
  auto loss = (*metrics)->Gauge("tandem_loss", "Training loss of the last step.");
  auto step_time = (*metrics)->Histogram("tandem_step_seconds", "Step wall time.",
                                         Metrics::LatencyBuckets());
  ASSERT_TRUE(steps.ok() && loss.ok() && step_time.ok());
  (*steps)->Increment(3);
  (*loss)->Set(0.25);
  (*step_time)->Observe(0.012);

  std::string body = HttpGet((*metrics)->port(), "/metrics");
  ASSERT_FALSE(body.empty());
  EXPECT_NE(body.find("tandem_steps_total{job=\"test\",rank=\"0\",service=\"worker\"} 3"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("tandem_loss{job=\"test\",rank=\"0\",service=\"worker\"} 0.25"),
            std::string::npos);
  EXPECT_NE(body.find("tandem_step_seconds_count{"), std::string::npos);

  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string path = std::string(tmp) + "/scrape.txt";
  std::ofstream(path) << body;
  const std::string cmd = "promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  int rc = pclose(p);
  ASSERT_NE(rc, -1);
  EXPECT_EQ(WEXITSTATUS(rc), 0) << "promtool check metrics failed (is the Debian package "
                                   "'prometheus' installed? tools/setup.sh does):\n"
                                << out;
}

TEST(Metrics, OnlyMetricsPathIsServed) {
  auto metrics = Metrics::Create(Local(0));
  ASSERT_TRUE(metrics.ok());
  auto up = (*metrics)->Gauge("tandem_up", "1 while the process serves.");
  ASSERT_TRUE(up.ok());
  (*up)->Set(1);
  EXPECT_EQ(HttpGet((*metrics)->port(), "/other"), "only GET /metrics is served here\n");
  // Several scrapes in a row on one server, each the current exposition.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(HttpGet((*metrics)->port(), "/metrics"), (*metrics)->Scrape());
  }
}

TEST(Metrics, ScrapeMatchesServedText) {
  auto metrics = Metrics::Create(Local(-1));
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ((*metrics)->port(), -1);
  auto bytes = (*metrics)->Counter("tandem_bytes_total", "Bytes.");
  ASSERT_TRUE(bytes.ok());
  (*bytes)->Increment(1024);
  EXPECT_NE((*metrics)->Scrape().find("tandem_bytes_total{job=\"test\",rank=\"0\",service=\"worker\"} 1024"),
            std::string::npos);
}

TEST(Metrics, NamingRulesAreEnforced) {
  auto metrics = Metrics::Create(Local(-1));
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ((*metrics)->Counter("steps_total", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*metrics)->Counter("tandem_steps", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*metrics)->Gauge("tandem_live_total", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*metrics)->Gauge("tandem_Loss", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*metrics)->Histogram("tandem_x_seconds", "x", {1.0, 0.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Metrics, ClashingKindIsAnErrorNotACrash) {
  auto metrics = Metrics::Create(Local(-1));
  ASSERT_TRUE(metrics.ok());
  ASSERT_TRUE((*metrics)->Gauge("tandem_queue_depth", "x").ok());
  auto clash = (*metrics)->Histogram("tandem_queue_depth", "x", {1, 2});
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Metrics, ConstLabelCanBeAddedOnlyBeforeTheFirstMetric) {
  MetricsOptions o = Local(-1);
  o.labels = {{"job", "test"}};
  auto metrics = Metrics::Create(o);
  ASSERT_TRUE(metrics.ok());
  ASSERT_TRUE((*metrics)->AddConstLabel("rank", "3").ok());
  auto steps = (*metrics)->Counter("tandem_steps_total", "Steps.");
  ASSERT_TRUE(steps.ok());
  (*steps)->Increment();
  EXPECT_NE((*metrics)->Scrape().find("tandem_steps_total{job=\"test\",rank=\"3\"} 1"),
            std::string::npos)
      << (*metrics)->Scrape();
  EXPECT_EQ((*metrics)->AddConstLabel("rank", "4").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Metrics, OccupiedPortIsUnavailable) {
  auto first = Metrics::Create(Local(0));
  ASSERT_TRUE(first.ok());
  auto second = Metrics::Create(Local((*first)->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tandem
