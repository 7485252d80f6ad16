#include "tools/tandem/plan_command.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_split.h"
#include "common/io/file.h"
#include "common/plan/machine_profile.h"
#include "gtest/gtest.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/local_options.h"

namespace tandem {
namespace cli {
namespace {

std::string TmpDir() { return std::getenv("TEST_TMPDIR"); }

TEST(PlanCommandTest, TableListsEveryStrategyAndRecommendsTheFastest) {
  PlanOptions o;
  o.nodes = 2;
  o.per_node = 2;
  o.servers = 2;
  o.link = "100mbit";
  o.tie_fraction = 0;  // the fastest, whatever its memory
  auto text = RunPlan(o, "");
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* s :
       {"allreduce", "hier", "zero1", "zero2", "zero3", "ps", "hybrid", "compressed:int8"}) {
    EXPECT_NE(text->find(std::string("\n") + s + " "), std::string::npos) << s << "\n" << *text;
  }
  // The recommendation is the first row that is not lossy (no " *").
  size_t row = text->find(" flags\n");
  ASSERT_NE(row, std::string::npos);
  std::string first;
  for (row += 7; row < text->size(); row = text->find('\n', row) + 1) {
    const std::string line = text->substr(row, text->find('\n', row) - row);
    if (line.empty()) break;
    if (line.find(" * ") != std::string::npos) continue;
    first = line.substr(0, line.find(' '));
    break;
  }
  ASSERT_FALSE(first.empty()) << *text;
  EXPECT_NE(text->find("recommended: tandem local " + CommonLocalFlags(o) + " " +
                       StrategyLocalFlags(o, first) + " ("),
            std::string::npos)
      << *text;
  EXPECT_NE(text->find("links 100mbit"), std::string::npos);
  // Each row says what bounds it, and how much of the step that part costs.
  EXPECT_NE(text->find(" bound "), std::string::npos) << *text;
  EXPECT_TRUE(text->find("  link ") != std::string::npos ||
              text->find("  latency ") != std::string::npos ||
              text->find("  CPU ") != std::string::npos)
      << *text;
}

TEST(PlanCommandTest, JsonHasOneObjectPerStrategy) {
  PlanOptions o;
  o.nodes = 2;
  o.json = true;
  auto text = RunPlan(o, "");
  ASSERT_TRUE(text.ok()) << text.status();
  size_t count = 0;
  for (size_t at = text->find("\"strategy\""); at != std::string::npos;
       at = text->find("\"strategy\"", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, plan::PlannedStrategies(plan::Cluster{2, 1}).size());
  EXPECT_NE(text->find("\"recommended\": \""), std::string::npos);
  EXPECT_NE(text->find("\"latency_bound_s\": "), std::string::npos) << *text;
  size_t bounds = 0;
  for (const char* b : {"\"bound\": \"link\"", "\"bound\": \"CPU\"", "\"bound\": \"latency\""}) {
    for (size_t at = text->find(b); at != std::string::npos; at = text->find(b, at + 1)) ++bounds;
  }
  EXPECT_EQ(bounds, count) << *text;
}

plan::Prediction Row(const char* strategy, double step_s, int64_t bytes) {
  plan::Prediction p;
  p.strategy = strategy;
  p.step_s = step_s;
  p.param_bytes = bytes;
  p.bottleneck = "compute";
  p.why = "forward + backward";
  return p;
}

// Within --tie_fraction of the fastest, the least memory per worker wins and
// the line says why; outside it, speed does; a row that does not fit never.
TEST(PlanCommandTest, NearTiesAreDecidedByMemoryPerWorker) {
  PlanOptions o;
  o.per_node = 4;
  plan::PlanRequest r;
  r.cluster.per_node = 4;
  std::vector<plan::Prediction> ps = {Row("allreduce", 0.1000, 400 << 20),
                                      Row("zero1", 0.1010, 300 << 20),
                                      Row("zero2", 0.1020, 200 << 20),
                                      Row("zero3", 0.1500, 100 << 20)};
  std::string text = FormatPlan(o, r, ps);
  EXPECT_NE(text.find("recommended: tandem local " + CommonLocalFlags(o) + " --sync zero2 ("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("allreduce, zero1, zero2 are within 3% of each other's step time"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(200.0 MiB against 400.0 MiB for allreduce)"), std::string::npos) << text;
  EXPECT_NE(text.find("; 1.47x faster than zero3"), std::string::npos) << text;

  o.tie_fraction = 0.015;  // only zero1 is tied with allreduce now
  text = FormatPlan(o, r, ps);
  EXPECT_NE(text.find("--sync zero1 ("), std::string::npos) << text;

  o.tie_fraction = 0.03;
  ps[2].fits = false;  // zero2 does not fit: zero1 is the least memory that does
  text = FormatPlan(o, r, ps);
  EXPECT_NE(text.find("--sync zero1 ("), std::string::npos) << text;
  EXPECT_NE(text.find("does not fit"), std::string::npos) << text;
  o.json = true;
  text = FormatPlan(o, r, ps);
  EXPECT_NE(text.find("\"recommended\": \"zero1\", \"tied\": [\"allreduce\", \"zero1\"]"),
            std::string::npos)
      << text;

  for (plan::Prediction& p : ps) p.fits = false;
  o.json = false;
  text = FormatPlan(o, r, ps);
  EXPECT_NE(text.find("no strategy fits in the memory per worker"), std::string::npos) << text;
}

double FirstStepSeconds(const std::string& json) {
  const size_t at = json.find("\"step_s\": ");
  EXPECT_NE(at, std::string::npos) << json;
  return at == std::string::npos ? 0 : std::stod(json.substr(at + 10));
}

// GPT-2 small on 64 nodes x 8: this machine's CPU profile predicts
// minutes per step; the H100 datasheet profile a fraction of a second, and
// says where its numbers come from.
TEST(PlanCommandTest, GpuProfilesPlanGpuClusters) {
  PlanOptions o;
  o.model = "gpt:layers=12,heads=12,width=768,context=1024,vocab=50304";
  o.nodes = 64;
  o.per_node = 8;
  o.batch_size = 8;
  o.optimizer = "adamw";
  o.json = true;
  auto cpu = RunPlan(o, "");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  o.gpu = "h100";
  auto gpu = RunPlan(o, "");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_GT(FirstStepSeconds(*cpu), 60);
  EXPECT_LT(FirstStepSeconds(*gpu), 1);
  EXPECT_GT(FirstStepSeconds(*gpu), 0.005);
  EXPECT_NE(gpu->find("\"profile_kind\": \"gpu\""), std::string::npos);
  o.json = false;
  auto table = RunPlan(o, "");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_NE(table->find("datasheet-derived, not measured: NVIDIA H100 SXM5 80GB, bf16"),
            std::string::npos)
      << *table;
  EXPECT_NE(table->find("per node (the profile's node network)"), std::string::npos) << *table;

  o.calibrate = true;
  auto both = RunPlan(o, "");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("give --gpu or those, not both"), std::string::npos);
  o.calibrate = false;
  o.gpu = "v100";
  auto unknown = RunPlan(o, "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown GPU 'v100' (known: h200, h100, a100)"),
            std::string::npos)
      << unknown.status();
}

// Each strategy's flags as a row prints them.
TEST(PlanCommandTest, FlagsAreWhatTandemLocalTakes) {
  PlanOptions o;
  o.servers = 2;
  EXPECT_EQ(StrategyLocalFlags(o, "hier"), "--sync allreduce --sync_opt hier=1");
  EXPECT_EQ(StrategyLocalFlags(o, "zero3"), "--sync zero3");
  EXPECT_EQ(StrategyLocalFlags(o, "hybrid"), "--sync hybrid --shard_servers 2");
  EXPECT_EQ(StrategyLocalFlags(o, "compressed:topk=0.01"),
            "--sync compressed --sync_opt codec=topk,k=0.01");
  EXPECT_EQ(StrategyLocalFlags(o, "compressed:int8"), "--sync compressed --sync_opt codec=int8");
  // Planned without replicas: the flags run it that way.
  o.shard_replicas = false;
  EXPECT_EQ(StrategyLocalFlags(o, "ps"), "--sync ps --shard_servers 2 --sync_opt replicate=0");
}

// Every "flags" field plan prints (and its recommendation line) parses
// with `tandem local`'s parser and passes its checks, for clusters of one
// node and of several, with shard servers, another optimizer and bucket.
TEST(PlanCommandTest, EveryFlagLinePlanPrintsIsAcceptedByTandemLocal) {
  PlanOptions one;
  one.per_node = 4;
  PlanOptions many;
  many.nodes = 2;
  many.per_node = 2;
  many.servers = 2;
  many.link = "1gbit";
  many.optimizer = "adamw";
  many.bucket_cap_mb = 8;
  many.model = "mlp:784,64,10";
  size_t checked = 0, expected = 0;
  for (PlanOptions o : {one, many}) {
    // One per row in the JSON, and the table's recommendation.
    expected += plan::PlannedStrategies(plan::Cluster{o.nodes, o.per_node, o.servers}).size() + 1;
    for (bool json : {true, false}) {
      o.json = json;
      auto text = RunPlan(o, "");
      ASSERT_TRUE(text.ok()) << text.status();
      std::vector<std::string> lines;
      const std::string field = "\"flags\": \"";
      for (size_t at = text->find(field); at != std::string::npos; at = text->find(field, at + 1)) {
        const size_t from = at + field.size();
        lines.push_back(text->substr(from, text->find('"', from) - from));
      }
      const std::string rec = "recommended: tandem local ";
      if (const size_t at = text->find(rec); at != std::string::npos) {
        const size_t from = at + rec.size();
        lines.push_back(text->substr(from, text->find(" (", from) - from));
      }
      ASSERT_FALSE(lines.empty()) << *text;
      for (const std::string& line : lines) {
        std::vector<std::string> args = {"local"};
        for (absl::string_view w : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
          args.emplace_back(w);
        }
        auto parsed = ParseCommandLine(args);
        ASSERT_TRUE(parsed.ok()) << line << ": " << parsed.status();
        absl::Status valid = ValidateLocalOptions(parsed->local);
        EXPECT_TRUE(valid.ok()) << line << ": " << valid;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, expected);
}

TEST(PlanCommandTest, ProfileFileIsUsedAndBadOnesAreRefused) {
  const std::string path = TmpDir() + "/profile";
  ASSERT_TRUE(WriteFileAtomically(path, "source = hand-made\ngemm_flops_per_s = 1e9\n").ok());
  PlanOptions o;
  o.profile = path;
  auto text = RunPlan(o, "");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("profile: hand-made"), std::string::npos) << *text;
  EXPECT_NE(text->find("1.0 GFLOP/s per worker"), std::string::npos) << *text;
  ASSERT_TRUE(WriteFileAtomically(path, "gemm_flops_per_s = fast\n").ok());
  EXPECT_EQ(RunPlan(o, "").status().code(), absl::StatusCode::kInvalidArgument);
  o.profile = TmpDir() + "/missing";
  EXPECT_EQ(RunPlan(o, "").status().code(), absl::StatusCode::kNotFound);
}

TEST(PlanCommandTest, BadFlagsNameTheFlag) {
  PlanOptions o;
  o.model = "transformer:big";
  EXPECT_NE(RunPlan(o, "").status().message().find("--model"), std::string::npos);
  o = PlanOptions{};
  o.link = "0mbit";
  EXPECT_NE(RunPlan(o, "").status().message().find("--link"), std::string::npos);
  o = PlanOptions{};
  o.per_node = 0;
  EXPECT_EQ(RunPlan(o, "").status().code(), absl::StatusCode::kInvalidArgument);
}

// --cpu_share: a bad value is refused naming the flag; half the cores doubles
// the CPU floor that bounds a simulated 8x2 job on this host.
TEST(PlanCommandTest, CpuShareScalesTheOneHostFloorAndBadValuesAreRefused) {
  // The CPU terms a calibration would measure (the built-in profile has none).
  const std::string path = TmpDir() + "/cpu_profile";
  ASSERT_TRUE(WriteFileAtomically(path,
                                  "source = hand-made\nring_round_cpu_16_s = 30e-6\n"
                                  "shard_call_cpu_s = 5e-4\nstep_cpu_s = 2e-3\n")
                  .ok());
  PlanOptions o;
  o.profile = path;
  o.nodes = 8;
  o.per_node = 2;
  o.servers = 8;
  o.one_host = true;
  o.json = true;
  o.cpu_share = 1.5;
  auto bad = RunPlan(o, "");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--cpu_share"), std::string::npos) << bad.status();
  auto floor_of = [&](double share) {
    o.cpu_share = share;
    auto text = RunPlan(o, "");
    EXPECT_TRUE(text.ok()) << text.status();
    if (!text.ok()) return -1.0;
    const size_t at = text->find("\"cpu_floor_s\":");
    EXPECT_NE(at, std::string::npos) << *text;
    return at == std::string::npos ? -1.0 : std::atof(text->c_str() + at + 14);
  };
  const double whole = floor_of(1);
  const double half = floor_of(0.5);
  ASSERT_GT(whole, 0);
  EXPECT_NEAR(half, 2 * whole, 1e-5 * whole);  // printed with %.6g
}

TEST(PlanCommandTest, CalibrateSavesAProfileTheNextPlanLoads) {
  PlanOptions o;
  o.model = "mlp:32,16,10";
  o.batch_size = 8;
  o.calibrate = true;
  const std::string home = TmpDir() + "/home";
  auto text = RunPlan(o, home);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("profile saved to " + home + "/.config/tandem/plan_profile"),
            std::string::npos);
  // The shard-server call rounds were measured with the ring rounds.
  auto saved = plan::LoadMachineProfile(home + "/.config/tandem/plan_profile");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_GT(saved->shard_round_2_s, 0);
  EXPECT_GT(saved->shard_round_16_s, 0);
  o.calibrate = false;
  auto again = RunPlan(o, home);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(again->find("measured by tandem plan --calibrate"), std::string::npos) << *again;
}

}  // namespace
}  // namespace cli
}  // namespace tandem
