// The strategy registry with two strategies registered by this test (so the
// listing is known): parsing of --sync_opt, unknown strategies and keys,
// value validation, NeedsNodeGroups and the checks CreateGradientSync makes
// before calling a factory. No communication.
#include "common/sync/registry.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

class NullCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "null"; }
  absl::Status AllReduce(float*, int64_t, ReduceOp) override { return absl::OkStatus(); }
  absl::Status ReduceScatter(const float*, float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllGather(const void*, void*, int64_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, int64_t, int) override { return absl::OkStatus(); }
  absl::Status AllToAll(const void*, void*, int64_t) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

// A strategy that only remembers how it was built.
class RecordingSync final : public GradientSync {
 public:
  RecordingSync(std::string name, SyncOptions options, int64_t size, int64_t chunks)
      : name_(std::move(name)), options_(std::move(options)), size_(size), chunks_(chunks) {}
  std::string name() const override { return name_; }
  optim::ParamRange owned_range() const override { return {0, size_}; }
  absl::Status BeginStep(const StepOptions&) override { return absl::OkStatus(); }
  void OnGradientsReady(int64_t, int64_t) override {}
  absl::Status FinishStep(const optim::StepContext&) override { return absl::OkStatus(); }
  optim::Optimizer* optimizer() override { return nullptr; }
  SyncStats stats() const override { return {}; }
  SyncMemory memory() const override { return {}; }

  const SyncOptions& options() const { return options_; }
  int64_t chunks() const { return chunks_; }

 private:
  std::string name_;
  SyncOptions options_;
  int64_t size_;
  int64_t chunks_;
};

StrategyInfo AlphaInfo() {
  StrategyInfo info;
  info.name = "test_alpha";
  info.summary = "registry test strategy";
  info.options = {{"bucket_cap_mb", "25", "MiB per gradient bucket"},
                  {"chunks", "1", "pieces per allreduce, >= 1"}};
  info.validate = [](const SyncOptions& o) -> absl::Status {
    absl::StatusOr<int64_t> chunks = GetSyncOptInt(o, "chunks", 1);
    if (!chunks.ok()) return chunks.status();
    if (*chunks < 1) {
      return absl::InvalidArgumentError("chunks must be >= 1");
    }
    return absl::OkStatus();
  };
  return info;
}

StrategyInfo BetaInfo() {
  StrategyInfo info;
  info.name = "test_beta";
  info.summary = "needs node groups";
  info.needs_node_groups = true;
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> MakeRecording(const SyncOptions& o, SyncEnv env) {
  absl::StatusOr<int64_t> chunks = GetSyncOptInt(o, "chunks", 1);
  if (!chunks.ok()) return chunks.status();
  return std::unique_ptr<GradientSync>(new RecordingSync(o.strategy, o, env.size, *chunks));
}

TANDEM_REGISTER_SYNC_STRATEGY(AlphaInfo(), MakeRecording);
TANDEM_REGISTER_SYNC_STRATEGY(BetaInfo(), MakeRecording);

SyncEnv EnvWith(CommGroups* groups) {
  SyncEnv env;
  env.comms = groups;
  env.size = 0;
  env.make_optimizer = [](optim::ParamRange) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    return absl::UnimplementedError("not used");
  };
  return env;
}

TEST(SyncRegistry, ListsRegisteredStrategiesSortedByName) {
  std::vector<StrategyInfo> all = RegisteredStrategies();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "test_alpha");
  EXPECT_EQ(all[1].name, "test_beta");
  absl::StatusOr<StrategyInfo> beta = FindStrategy("test_beta");
  ASSERT_TRUE(beta.ok()) << beta.status();
  EXPECT_TRUE(beta->needs_node_groups);
}

TEST(SyncRegistry, UnknownStrategyListsTheRegisteredOnes) {
  absl::StatusOr<StrategyInfo> s = FindStrategy("zero9");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "--sync 'zero9' is unknown: registered strategies are test_alpha, test_beta");
  SyncOptions o;
  o.strategy = "zero9";
  EXPECT_EQ(ValidateSyncOptions(o).message(), s.status().message());
}

TEST(SyncRegistry, ParsesKeysAndTypedFields) {
  absl::StatusOr<SyncOptions> o =
      ParseSyncOptions("test_alpha", " chunks = 3 ,bucket_cap_mb=8.5,max_grad_norm=1");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->strategy, "test_alpha");
  EXPECT_EQ(o->bucket_cap_mb, 8.5);
  EXPECT_EQ(o->max_grad_norm, 1.0);
  ASSERT_EQ(o->opts.size(), 1u);
  EXPECT_EQ(o->opts.at("chunks"), "3");
  EXPECT_TRUE(ValidateSyncOptions(*o).ok());

  absl::StatusOr<SyncOptions> empty = ParseSyncOptions("test_beta", "");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->opts.empty());
  EXPECT_EQ(empty->bucket_cap_mb, 25);
  EXPECT_EQ(empty->max_grad_norm, 0);
}

TEST(SyncRegistry, SyntaxErrorsSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* message_part;
  } cases[] = {
      {"chunks", "'chunks' has no '='"},
      {"=3", "empty key"},
      {"chunks=", "'chunks' has an empty value"},
      {"chunks=1,,x=2", "empty item"},
      {"chunks=1,", "empty item"},
      {"chunks=1,chunks=2", "'chunks' is given twice"},
      {"bucket_cap_mb=1,bucket_cap_mb=2", "'bucket_cap_mb' is given twice"},
      {"bucket_cap_mb=big", "bucket_cap_mb='big' is not a finite number"},
      {"max_grad_norm=inf", "max_grad_norm='inf' is not a finite number"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("test_alpha", c.text);
    ASSERT_FALSE(o.ok()) << c.text;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(o.status().message().find(c.message_part), std::string::npos)
        << c.text << ": " << o.status().message();
  }
}

TEST(SyncRegistry, UnknownKeyListsTheStrategysKeysWithMeaningsAndDefaults) {
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("test_alpha", "chunkz=2");
  ASSERT_TRUE(o.ok());
  absl::Status s = ValidateSyncOptions(*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--sync_opt key 'chunkz' is not an option of strategy 'test_alpha': valid keys are "
            "bucket_cap_mb (MiB per gradient bucket, default 25), chunks (pieces per "
            "allreduce, >= 1, default 1), max_grad_norm (global L2 clip across ranks, 0 = "
            "off, default 0)");
  // A key of another strategy is unknown here.
  absl::StatusOr<SyncOptions> b = ParseSyncOptions("test_beta", "chunks=2");
  ASSERT_TRUE(b.ok());
  EXPECT_NE(ValidateSyncOptions(*b).message().find("not an option of strategy 'test_beta'"),
            std::string::npos);
}

TEST(SyncRegistry, BadValuesAreRejected) {
  SyncOptions o;
  o.strategy = "test_alpha";
  o.opts["chunks"] = "0";
  absl::Status s = ValidateSyncOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("chunks must be >= 1"), std::string::npos) << s;
  o.opts["chunks"] = "two";
  EXPECT_NE(ValidateSyncOptions(o).message().find("chunks='two' is not an integer"),
            std::string::npos);
  o.opts.clear();
  o.bucket_cap_mb = 0;
  EXPECT_NE(ValidateSyncOptions(o).message().find("bucket_cap_mb must be a positive"),
            std::string::npos);
  o.bucket_cap_mb = 1;
  o.max_grad_norm = -1;
  EXPECT_NE(ValidateSyncOptions(o).message().find("max_grad_norm must be >= 0"), std::string::npos);
}

TEST(SyncRegistry, CreateCallsTheFactoryWithTheOptions) {
  CommGroups groups;
  groups.world = std::make_unique<NullCommunicator>();
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("test_alpha", "chunks=4,bucket_cap_mb=2");
  ASSERT_TRUE(o.ok());
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = CreateGradientSync(*o, EnvWith(&groups));
  ASSERT_TRUE(sync.ok()) << sync.status();
  auto* rec = static_cast<RecordingSync*>(sync->get());
  EXPECT_EQ(rec->name(), "test_alpha");
  EXPECT_EQ(rec->chunks(), 4);
  EXPECT_EQ(rec->options().bucket_cap_mb, 2);
}

TEST(SyncRegistry, CreateChecksTheEnvironment) {
  SyncOptions alpha;
  alpha.strategy = "test_alpha";
  CommGroups no_world;
  absl::StatusOr<std::unique_ptr<GradientSync>> s = CreateGradientSync(alpha, EnvWith(&no_world));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("world communicator is required"), std::string::npos);

  CommGroups groups;
  groups.world = std::make_unique<NullCommunicator>();
  SyncEnv env = EnvWith(&groups);
  env.size = 10;  // but no params / grads
  s = CreateGradientSync(alpha, std::move(env));
  EXPECT_NE(s.status().message().find("params and grads are required"), std::string::npos);

  env = EnvWith(&groups);
  env.make_optimizer = nullptr;
  s = CreateGradientSync(alpha, std::move(env));
  EXPECT_NE(s.status().message().find("make_optimizer is required"), std::string::npos);

  SyncOptions beta;
  beta.strategy = "test_beta";
  s = CreateGradientSync(beta, EnvWith(&groups));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("needs the intra-node and inter-node groups"),
            std::string::npos);
  groups.intra = std::make_unique<NullCommunicator>();
  groups.inter = std::make_unique<NullCommunicator>();
  s = CreateGradientSync(beta, EnvWith(&groups));
  EXPECT_TRUE(s.ok()) << s.status();
}

TEST(SyncRegistry, NeedsNodeGroupsIsStaticUnlessTheStrategyDecidesFromItsOptions) {
  SyncOptions o;
  EXPECT_FALSE(NeedsNodeGroups(AlphaInfo(), o));
  EXPECT_TRUE(NeedsNodeGroups(BetaInfo(), o));
  StrategyInfo info;
  info.name = "test_split";
  info.needs_node_groups = true;  // ignored once wants_node_groups is set
  info.wants_node_groups = [](const SyncOptions& opts) {
    return opts.opts.count("split") != 0 && opts.opts.at("split") == "1";
  };
  EXPECT_FALSE(NeedsNodeGroups(info, o));
  o.opts["split"] = "1";
  EXPECT_TRUE(NeedsNodeGroups(info, o));
  o.opts["split"] = "0";
  EXPECT_FALSE(NeedsNodeGroups(info, o));
}

TEST(SyncRegistryDeathTest, RegisteringANameTwiceAborts) {
  EXPECT_DEATH(RegisterStrategy(AlphaInfo(), MakeRecording), "registered twice");
}

}  // namespace
}  // namespace sync
}  // namespace tandem
