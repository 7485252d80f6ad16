// Integration tests with real dataserver processes: kill a server mid-stream
// (SIGKILL) and start a new one, or let the client fail over to another;
// the trainer-side sequence must be exactly the sampler's, nothing lost or
// repeated. Also the binary's start-up failures (one line, non-zero exit).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/data/prefetch_client.h"
#include "common/data/record_shard.h"
#include "common/data/sampler.h"
#include "gtest/gtest.h"
#include "common/data/dataset.h"

namespace tandem {
namespace {

constexpr int64_t kSamples = 1000;
// Large enough that the kill lands mid-stream: what gRPC buffers in flight
// (flow-control windows, a few MB) is far less than what the test reads.
constexpr int64_t kFeatureBytes = 8192;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ServerBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/tandem/services/dataserver/dataserver";
}

// Sample i's features: 8 bytes of i, then (i * 7) repeated.
std::string WriteDataset() {
  const std::string path = TmpPath("restart.tshard");
  v1::DatasetInfo info;
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
  info.mutable_feature_spec()->add_shape(kFeatureBytes);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  auto w = data::RecordShardWriter::Create(path, data::EncodeShardMetadata(info));
  EXPECT_TRUE(w.ok());
  for (int64_t i = 0; i < kSamples; ++i) {
    std::string rec(reinterpret_cast<const char*>(&i), 8);
    rec.append(kFeatureBytes - 8, static_cast<char>(i * 7));
    const int32_t label = static_cast<int32_t>(i % 10);
    rec.append(reinterpret_cast<const char*>(&label), 4);
    EXPECT_TRUE((*w)->Add(rec).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

// A dataserver child process; its stdout's first line gives the port.
struct ServerProcess {
  pid_t pid = -1;
  int stdout_fd = -1;
  int port = 0;
  std::string stderr_text;
  int exit_status = -1;

  // Starts the binary with `args`; returns false (with stderr_text and
  // exit_status filled) if it exits instead of serving.
  bool Start(const std::vector<std::string>& args) {
    static int count = 0;
    const std::string err_path = TmpPath(absl::StrCat("server-", count++, ".stderr"));
    int out[2];
    if (pipe(out) != 0) return false;
    pid = fork();
    if (pid == 0) {
      // stderr goes to a file: a closed pipe would kill the server (SIGPIPE)
      // the first time gRPC logs something.
      FILE* err = std::fopen(err_path.c_str(), "w");
      if (err != nullptr) dup2(fileno(err), 2);
      dup2(out[1], 1);
      close(out[0]);
      std::vector<char*> argv;
      const std::string bin = ServerBinary();
      argv.push_back(const_cast<char*>(bin.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_fd = out[0];  // kept open while the server runs
    // Blocks until the server prints its line or exits (EOF).
    std::string line;
    char c;
    while (read(stdout_fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    const size_t colon = line.rfind(':', line.find(" metrics_port"));
    if (absl::StartsWith(line, "dataserver listening on ") && colon != std::string::npos &&
        absl::SimpleAtoi(line.substr(colon + 1, line.find(' ', colon) - colon - 1), &port)) {
      return true;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    pid = -1;
    std::ifstream in(err_path);
    stderr_text.assign(std::istreambuf_iterator<char>(in), {});
    return false;
  }

  void Kill() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
    if (stdout_fd >= 0) close(stdout_fd);
    stdout_fd = -1;
  }
  ~ServerProcess() { Kill(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
};

struct Step {
  int64_t epoch, step;
  std::vector<int64_t> ids;
};

// The batches rank `rank` must see, from the sampler alone.
std::vector<Step> Reference(const data::SamplerConfig& c, int rank, int64_t n) {
  std::vector<Step> out;
  data::Cursor cur;
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < n; ++k) {
    data::EpochPermutation(c.num_samples, c.seed, cur.epoch, c.shuffle, &perm);
    const data::IndexRange r = data::RankSlice(c, cur.step_in_epoch, rank);
    out.push_back({cur.epoch, cur.step_in_epoch,
                   std::vector<int64_t>(perm.begin() + r.begin, perm.begin() + r.end)});
    cur = data::Advance(c, cur);
  }
  return out;
}

Step Check(const data::HostBatch& b) {
  Step s{b.epoch, b.step_in_epoch, b.sample_ids};
  EXPECT_EQ(b.features.size(), b.sample_ids.size() * kFeatureBytes);
  for (size_t k = 0; k < b.sample_ids.size(); ++k) {
    int64_t v;
    std::memcpy(&v, b.features.data() + k * kFeatureBytes, 8);
    EXPECT_EQ(v, b.sample_ids[k]);
  }
  return s;
}

class ServerRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dataset_ = WriteDataset();
    config_ = {.num_samples = kSamples, .seed = 11, .global_batch_size = 30,
               .world_size = 3, .remainder = data::Remainder::kShortLast};
  }
  data::PrefetchOptions Options(std::vector<std::string> servers, int64_t max) {
    data::PrefetchOptions o;
    o.servers = std::move(servers);
    o.request.set_dataset("d");
    o.request.set_seed(config_.seed);
    o.request.set_global_batch_size(config_.global_batch_size);
    o.request.set_rank(1);
    o.request.set_world_size(3);
    o.request.set_remainder(v1::SHORT_LAST);
    o.request.set_shuffle(true);
    o.request.set_max_batches(max);
    o.prefetch_depth = 4;
    o.initial_backoff = absl::Milliseconds(10);
    o.max_backoff = absl::Milliseconds(200);
    return o;
  }
  std::vector<std::string> Args(int port = 0) {
    return {"--dataset=d=" + dataset_, absl::StrCat("--port=", port),
            "--prefetch_depth=2", "--decode_threads=2"};
  }

  std::string dataset_;
  data::SamplerConfig config_;
};

TEST_F(ServerRestartTest, KilledServerRestartedOnSamePortNothingLostOrRepeated) {
  ServerProcess server;
  ASSERT_TRUE(server.Start(Args())) << server.stderr_text;
  const int port = server.port;
  const int64_t total = 300;  // 34 steps per epoch: crosses 8 epochs
  auto client = data::PrefetchClient::Start(Options({server.address()}, total));
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<Step> got;
  for (int i = 0; i < 20; ++i) {
    auto b = (*client)->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    got.push_back(Check(**b));
  }
  server.Kill();  // mid-stream: the client has more to fetch
  const absl::Time killed = absl::Now();
  ServerProcess restarted;
  ASSERT_TRUE(restarted.Start(Args(port))) << restarted.stderr_text;
  std::fprintf(stderr, "restarted after %s\n", absl::FormatDuration(absl::Now() - killed).c_str());
  for (;;) {
    auto b = (*client)->Next();
    if (absl::IsOutOfRange(b.status())) break;
    ASSERT_TRUE(b.ok()) << b.status();
    got.push_back(Check(**b));
  }
  std::fprintf(stderr, "done after %s, %ld reconnects\n",
               absl::FormatDuration(absl::Now() - killed).c_str(),
               static_cast<long>((*client)->reconnects()));
  const std::vector<Step> want = Reference(config_, 1, total);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].epoch, want[i].epoch) << i;
    EXPECT_EQ(got[i].step, want[i].step) << i;
    EXPECT_EQ(got[i].ids, want[i].ids) << i;
  }
  EXPECT_GE((*client)->reconnects(), 1);
  EXPECT_EQ((*client)->cursor(), (data::Cursor{8, 300 - 8 * 34}));
}

TEST_F(ServerRestartTest, ClientFailsOverWhenItsServerDies) {
  ServerProcess a, b;
  ASSERT_TRUE(a.Start(Args())) << a.stderr_text;
  ASSERT_TRUE(b.Start(Args())) << b.stderr_text;
  // Rank 1 of 3 with two servers starts on servers[1 % 2] = a.
  const int64_t total = 300;
  auto client = data::PrefetchClient::Start(Options({b.address(), a.address()}, total));
  ASSERT_TRUE(client.ok());
  std::vector<Step> got;
  for (int i = 0; i < 10; ++i) {
    auto batch = (*client)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    got.push_back(Check(**batch));
  }
  a.Kill();
  for (;;) {
    auto batch = (*client)->Next();
    if (absl::IsOutOfRange(batch.status())) break;
    ASSERT_TRUE(batch.ok()) << batch.status();
    got.push_back(Check(**batch));
  }
  const std::vector<Step> want = Reference(config_, 1, total);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].ids, want[i].ids) << i;
  EXPECT_GE((*client)->reconnects(), 1);
}

TEST_F(ServerRestartTest, BinaryStartupErrorsAreOneLine) {
  auto expect_one_line = [](const ServerProcess& p, const std::string& needle) {
    EXPECT_EQ(p.exit_status, 1) << p.stderr_text;
    EXPECT_TRUE(absl::StrContains(p.stderr_text, needle)) << p.stderr_text;
    EXPECT_EQ(std::count(p.stderr_text.begin(), p.stderr_text.end(), '\n'), 1)
        << p.stderr_text;
  };
  {
    ServerProcess p;
    EXPECT_FALSE(p.Start({"--dataset=x=" + TmpPath("missing.tshard")}));
    expect_one_line(p, "NOT_FOUND");
  }
  {
    // A truncated shard: DATA_LOSS naming the file and the offset.
    std::ifstream in(dataset_, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const std::string cut = TmpPath("cut.tshard");
    std::ofstream(cut, std::ios::binary).write(bytes.data(), bytes.size() / 2);
    ServerProcess p;
    EXPECT_FALSE(p.Start({"--dataset=x=" + cut}));
    expect_one_line(p, cut);
    EXPECT_TRUE(absl::StrContains(p.stderr_text, "offset")) << p.stderr_text;
  }
  {
    ServerProcess running;
    ASSERT_TRUE(running.Start(Args()));
    ServerProcess p;
    EXPECT_FALSE(p.Start(Args(running.port)));
    expect_one_line(p, "in use");
  }
  {
    ServerProcess p;
    EXPECT_FALSE(p.Start({"--dataset=nonsense"}));  // a bare path that does not exist
    expect_one_line(p, "nonsense: no such dataset");
  }
  {
    ServerProcess p;
    EXPECT_FALSE(p.Start({"--dataset==nonsense"}));
    expect_one_line(p, "name=path");
  }
}

}  // namespace
}  // namespace tandem
