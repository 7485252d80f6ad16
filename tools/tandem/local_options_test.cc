#include "tools/tandem/local_options.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/data/dataset.h"
#include "common/data/npy.h"
#include "tools/convert/npy_convert.h"

namespace tandem {
namespace cli {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// The error message of ValidateLocalOptions, or "" when valid.
std::string Problem(const LocalOptions& o) {
  absl::Status s = ValidateLocalOptions(o);
  return s.ok() ? "" : std::string(s.message());
}

TEST(LocalOptionsTest, DefaultsAreValid) { EXPECT_EQ(Problem(LocalOptions{}), ""); }

TEST(LocalOptionsTest, BatchModeAndSchedule) {
  LocalOptions o;
  o.workers = 2;
  o.batch_size = 32;
  o.batch = "auto";
  auto range = ResolveBatchRange(o);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(*range, (std::pair<int64_t, int64_t>{64, 512}));
  o.batch = "auto:100,900";
  EXPECT_EQ(*ResolveBatchRange(o), (std::pair<int64_t, int64_t>{100, 900}));
  o.batch = "";
  EXPECT_EQ(*ResolveBatchRange(o), (std::pair<int64_t, int64_t>{0, 0}));
  for (const char* bad : {"auto:900,100", "auto:0,5", "auto:5", "big"}) {
    o.batch = bad;
    EXPECT_TRUE(absl::StrContains(Problem(o), "auto:MIN,MAX")) << bad << ": " << Problem(o);
  }
  o.batch = "";
  o.batch_schedule = "100:256,300:64";
  EXPECT_EQ(Problem(o), "");
  for (const char* bad : {"100", "100:0", "300:64,100:256", "x:1"}) {
    o.batch_schedule = bad;
    EXPECT_TRUE(absl::StrContains(Problem(o), "--batch_schedule")) << bad << ": " << Problem(o);
  }
}

TEST(LocalOptionsTest, DecodeThreads) {
  LocalOptions o;
  o.decode_threads = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--decode_threads must be between 1 and 256"))
      << Problem(o);
}

TEST(LocalOptionsTest, TraceSteps) {
  LocalOptions o;
  o.trace = true;
  o.trace_steps = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--trace_steps must be at least 1")) << Problem(o);
  o.trace_steps = 1;
  EXPECT_EQ(Problem(o), "");
}

TEST(LocalOptionsTest, WorkerCounts) {
  LocalOptions o;
  o.workers = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--workers must be at least 1")) << Problem(o);
  o = LocalOptions{};
  o.min_workers = 3;
  o.max_workers = 2;
  EXPECT_TRUE(absl::StrContains(Problem(o), "greater than --max_workers")) << Problem(o);
  o = LocalOptions{};
  o.workers = 2;
  o.min_workers = 3;
  o.max_workers = 4;
  EXPECT_TRUE(absl::StrContains(Problem(o), "more than the 2 worker")) << Problem(o);
  o.min_workers = 1;
  EXPECT_EQ(Problem(o), "");
}

TEST(LocalOptionsTest, NodeLayoutFromTheFlagsAsGiven) {
  LocalOptions o;
  o.nodes = 2;
  o.workers_per_node = 3;
  ASSERT_TRUE(ResolveNodeLayout(&o, true, false).ok());
  EXPECT_EQ(o.workers, 6);  // --workers left out: nodes x per node
  EXPECT_EQ(Problem(o), "");

  o = LocalOptions{};
  o.nodes = 2;  // --workers (4 by default) split over the nodes
  ASSERT_TRUE(ResolveNodeLayout(&o, true, false).ok());
  EXPECT_EQ(o.workers_per_node, 2);

  o = LocalOptions{};
  o.nodes = 2;
  o.workers_per_node = 2;
  o.workers = 4;  // given and agreeing
  EXPECT_TRUE(ResolveNodeLayout(&o, true, true).ok());

  o = LocalOptions{};
  o.nodes = 2;
  o.workers_per_node = 2;
  o.workers = 3;
  absl::Status s = ResolveNodeLayout(&o, true, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--workers=3 disagrees with --nodes=2")) << s;

  o = LocalOptions{};
  o.nodes = -1;
  s = ResolveNodeLayout(&o, true, false);
  EXPECT_TRUE(absl::StrContains(s.message(), "--nodes must not be negative (got -1)")) << s;
  o.nodes = 0;  // the default --help shows: no simulated nodes, given or not
  EXPECT_TRUE(ResolveNodeLayout(&o, true, false).ok());
  EXPECT_TRUE(ResolveNodeLayout(&o, false, false).ok());

  o = LocalOptions{};
  o.nodes = 3;
  s = ResolveNodeLayout(&o, true, false);
  EXPECT_TRUE(absl::StrContains(s.message(), "does not split evenly over --nodes=3")) << s;
}

TEST(LocalOptionsTest, NodeFlagsChecked) {
  LocalOptions o;
  o.link = "1gbit";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--link needs --nodes")) << Problem(o);
  o = LocalOptions{};
  o.workers_per_node = 2;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--workers_per_node needs --nodes")) << Problem(o);
  o = LocalOptions{};
  o.nodes = 2;
  o.workers_per_node = 2;
  o.link = "lots";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--link 'lots' is not a link rate")) << Problem(o);
  o.link = "100mbit";
  EXPECT_EQ(Problem(o), "");
  o.host = "0.0.0.0";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--host=0.0.0.0 has no effect with --nodes"));
  o.host = LocalOptions().host;
  o.workers = 5;  // set by hand, not through ResolveNodeLayout
  EXPECT_TRUE(absl::StrContains(Problem(o), "--workers=5 is not --nodes=2 x --workers_per_node=2")) << Problem(o);
  o.workers = 4;
  o.nodes = 100;
  o.workers_per_node = 1;
  o.workers = 100;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--nodes must be 1..99")) << Problem(o);
}

TEST(LocalOptionsTest, ModelSpecParsedAndCheckedAgainstDataset) {
  LocalOptions o;
  o.model = "resnet:50";
  EXPECT_TRUE(absl::StrContains(Problem(o), "bad --model")) << Problem(o);
  o.model = "mlp:100,10";
  EXPECT_TRUE(absl::StrContains(Problem(o), "takes 100 inputs")) << Problem(o);
  o.model = "mlp:784,32,7";
  EXPECT_TRUE(absl::StrContains(Problem(o), "gives 7 classes")) << Problem(o);
  o.model = "gpt:layers=2,heads=4,width=64,context=32,vocab=256";
  EXPECT_TRUE(absl::StrContains(Problem(o), "does not fit dataset")) << Problem(o);
  o.model = "mlp:784,32,10";
  EXPECT_EQ(Problem(o), "");
}

TEST(LocalOptionsTest, UnknownOrMissingDataset) {
  LocalOptions o;
  o.dataset = "imagenet";
  EXPECT_TRUE(absl::StrContains(Problem(o), "unknown --dataset 'imagenet'")) << Problem(o);
  EXPECT_TRUE(absl::StrContains(Problem(o), "fashion-mnist")) << Problem(o);
  EXPECT_TRUE(absl::StrContains(Problem(o), "tandem convert --mode=npy")) << Problem(o);
  o = LocalOptions{};
  o.data_root = TmpPath("empty-root");
  EXPECT_TRUE(absl::StrContains(Problem(o), "not found under")) << Problem(o);
  // The user passed --data_root: no "pass --data_root" back at them.
  EXPECT_FALSE(absl::StrContains(Problem(o), "pass --data_root")) << Problem(o);
  EXPECT_TRUE(absl::StrContains(Problem(o), "check --data_root " + o.data_root)) << Problem(o);
}

TEST(LocalOptionsTest, SyncStrategyAndOptionsCheckedAgainstTheRegistry) {
  LocalOptions o;
  o.sync = "bogus";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--sync 'bogus' is unknown")) << Problem(o);
  EXPECT_TRUE(absl::StrContains(Problem(o), "allreduce")) << "lists the registered ones: "
                                                          << Problem(o);
  o = LocalOptions{};
  o.sync_opt = "nope=1";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--sync_opt key 'nope'")) << Problem(o);
  EXPECT_TRUE(absl::StrContains(Problem(o), "bucket_cap_mb")) << "lists the keys: " << Problem(o);
  o.sync_opt = "bucket_cap_mb";
  EXPECT_TRUE(absl::StrContains(Problem(o), "has no '='")) << Problem(o);
  o.sync_opt = "bucket_cap_mb=0";
  EXPECT_TRUE(absl::StrContains(Problem(o), "bucket_cap_mb must be a positive")) << Problem(o);
  o.sync_opt = "bucket_cap_mb=8,max_grad_norm=1";
  EXPECT_EQ(Problem(o), "");
  o = LocalOptions{};
  o.transport = "rdma";
  EXPECT_TRUE(absl::StrContains(Problem(o), "unknown --transport 'rdma'")) << Problem(o);
  o.transport = "gloo";
  EXPECT_EQ(Problem(o), "");
}

TEST(LocalOptionsTest, ResolvesFashionMnist) {
  auto d = ResolveDataset(LocalOptions{});
  ASSERT_TRUE(d.ok()) << d.status();
  // Read from the IDX files, not built in: what the workers will see.
  EXPECT_EQ(d->features, 784);
  EXPECT_EQ(d->classes, 10);
  EXPECT_EQ(d->inputs.sample_shape, (std::vector<int64_t>{28, 28}));
  EXPECT_EQ(d->train_name, "fashion-mnist/train");
  EXPECT_EQ(d->eval_name, "fashion-mnist/t10k");
  EXPECT_EQ(d->train_path, "/usr/share/datasets/fashion-mnist/train");
}

// A text dataset directory <root>/fortunes with two text files and a
// strfile index that must be skipped.
std::string FortunesRoot(const std::string& name) {
  const std::string root = TmpPath(name);
  mkdir(root.c_str(), 0755);
  mkdir((root + "/fortunes").c_str(), 0755);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "A fortune a day keeps the bugs away.\n%\n";
  std::ofstream(root + "/fortunes/a") << text;
  std::ofstream(root + "/fortunes/b") << text;
  std::ofstream(root + "/fortunes/a.dat") << "binary";
  return root;
}

LocalOptions FortunesOptions(const std::string& root, int context) {
  LocalOptions o;
  o.dataset = "fortunes";
  o.data_root = root;
  o.run_dir = root + "/run";
  o.model = absl::StrCat("gpt:layers=1,heads=2,width=16,context=", context, ",vocab=256");
  return o;
}

TEST(LocalOptionsTest, ResolvesFortunesIntoConvertedShardsOnce) {
  const std::string root = FortunesRoot("fortunes-root");
  auto d = ResolveDataset(FortunesOptions(root, 16));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train_name, "fortunes/train");
  EXPECT_EQ(d->eval_name, "fortunes/eval");
  EXPECT_TRUE(absl::StartsWith(d->train_path, root + "/run/data-cache/fortunes-ctx16-"))
      << d->train_path;
  EXPECT_EQ(d->features, 16);
  EXPECT_EQ(d->classes, 256);
  // The paths are what the data server opens: i32 windows of the context.
  auto train = data::OpenDataset(d->train_name, d->train_path);
  auto eval = data::OpenDataset(d->eval_name, d->eval_path);
  ASSERT_TRUE(train.ok() && eval.ok()) << train.status() << eval.status();
  EXPECT_EQ((*train)->info().feature_spec().dtype(), v1::DTYPE_I32);
  EXPECT_EQ((*train)->info().feature_spec().shape(0), 16);
  const int64_t text_bytes = 2 * 400 * 39;  // the .dat file is not text
  EXPECT_EQ((*train)->num_samples() + (*eval)->num_samples(), text_bytes / 17);
  EXPECT_GT((*train)->num_samples(), 10 * (*eval)->num_samples());

  // Resolving again (ValidateLocalOptions, then the run) reuses the entry.
  auto again = ResolveDataset(FortunesOptions(root, 16));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->train_path, d->train_path);
  // Another context is another conversion.
  auto wider = ResolveDataset(FortunesOptions(root, 32));
  ASSERT_TRUE(wider.ok()) << wider.status();
  EXPECT_NE(wider->train_path, d->train_path);
  EXPECT_EQ(wider->features, 32);
}

TEST(LocalOptionsTest, FortunesNeedsAGptModelAndText) {
  const std::string root = FortunesRoot("fortunes-mlp");
  LocalOptions o = FortunesOptions(root, 16);
  o.model = "mlp:784,32,10";
  auto d = ResolveDataset(o);
  EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << d.status();
  EXPECT_TRUE(absl::StrContains(d.status().message(), "--model gpt:")) << d.status();
  o.model = "gpt:layers=1";
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveDataset(o).status()));

  const std::string empty = TmpPath("fortunes-empty");
  mkdir(empty.c_str(), 0755);
  mkdir((empty + "/fortunes").c_str(), 0755);
  d = ResolveDataset(FortunesOptions(empty, 16));
  EXPECT_TRUE(absl::IsNotFound(d.status())) << d.status();
  EXPECT_TRUE(absl::StrContains(d.status().message(), "tools/setup.sh")) << d.status();
}

TEST(LocalOptionsTest, FortunesFromTheDebianPackage) {
  struct stat st;
  if (stat("/usr/share/games/fortunes", &st) != 0) {
    GTEST_SKIP() << "/usr/share/games/fortunes is missing (tools/setup.sh installs fortunes)";
  }
  LocalOptions o = FortunesOptions(TmpPath("no-such-root"), 128);  // falls back
  o.run_dir = TmpPath("fortunes-package-run");
  auto d = ResolveDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  auto train = data::OpenDataset(d->train_name, d->train_path);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_GT((*train)->num_samples(), 10000);  // ~2.5 MB of text / 129
  EXPECT_EQ((*train)->info().num_classes(), 256);
}

// Arrays of `n` samples shaped `sample_shape` (f32) with labels 0..2,
// converted into `out` (train, and eval when eval_n > 0).
void ConvertArrays(const std::string& out, std::vector<int64_t> sample_shape, int eval_n) {
  const std::string src = TmpPath(out.substr(out.rfind('/') + 1) + "-src");
  mkdir(src.c_str(), 0755);
  auto save = [&](const std::string& stem, int n) {
    data::NpyArray x, y;
    x.shape = {n};
    x.shape.insert(x.shape.end(), sample_shape.begin(), sample_shape.end());
    x.data.assign(x.elements() * 4, '\0');
    y.dtype = data::NpyDType::kInt32;
    y.shape = {n};
    for (int32_t i = 0; i < n; ++i) {
      const int32_t label = i % 3;
      y.data.append(reinterpret_cast<const char*>(&label), 4);
    }
    EXPECT_TRUE(data::WriteNpyFile(src + "/" + stem + "x.npy", x).ok());
    EXPECT_TRUE(data::WriteNpyFile(src + "/" + stem + "y.npy", y).ok());
    return convert::NpyPair{src + "/" + stem + "x.npy", src + "/" + stem + "y.npy"};
  };
  convert::NpySources s;
  s.train = save("train", 12);
  if (eval_n > 0) s.eval = save("eval", eval_n);
  mkdir(out.c_str(), 0755);
  auto r = convert::NpyToShards(s, {.out_dir = out});
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(LocalOptionsTest, ResolvesAConvertedDirectoryFromItsFiles) {
  ConvertArrays(TmpPath("converted"), {1, 2, 3}, 6);
  char real[PATH_MAX];
  ASSERT_NE(realpath(TmpPath("converted").c_str(), real), nullptr);
  const std::string dir = real;  // names and paths are absolute
  LocalOptions o;
  o.dataset = TmpPath("converted") + "/";
  o.model = "mlp:6,8,3";
  auto d = ResolveDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train_path, dir + "/train");
  EXPECT_EQ(d->train_name, d->train_path);  // served under its path
  EXPECT_EQ(d->eval_path, dir + "/eval");
  EXPECT_EQ(d->features, 6);
  EXPECT_EQ(d->classes, 3);
  EXPECT_EQ(d->inputs.sample_shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(DataServerDatasets(*d),
            dir + "/train=" + dir + "/train," + dir + "/eval=" + dir + "/eval");
  EXPECT_EQ(Problem(o), "");
  o.model = "mlp:784,8,10";
  EXPECT_TRUE(absl::StrContains(Problem(o), "use mlp:6,...,3")) << Problem(o);

  // A directory of shards alone: no evaluation unless --eval_dataset.
  o.dataset = dir + "/train";
  o.model = "mlp:6,8,3";
  d = ResolveDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->eval_name, "");
  EXPECT_EQ(DataServerDatasets(*d), dir + "/train=" + dir + "/train");
  o.eval_dataset = dir + "/eval";
  d = ResolveDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->eval_path, dir + "/eval");
  // A converted directory as the eval set: its eval/ (else its train/).
  o.eval_dataset = dir;
  d = ResolveDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->eval_path, dir + "/eval");
  ConvertArrays(TmpPath("eval-only"), {1, 2, 3}, 0);
  o.eval_dataset = TmpPath("eval-only");
  d = ResolveDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(absl::EndsWith(d->eval_path, "/eval-only/train")) << d->eval_path;
}

TEST(LocalOptionsTest, AnEvalSetOfOtherSamplesIsRefused) {
  const std::string a = TmpPath("shape-a"), b = TmpPath("shape-b");
  ConvertArrays(a, {6}, 0);
  ConvertArrays(b, {2, 3}, 0);
  LocalOptions o;
  o.dataset = a;
  o.eval_dataset = b + "/train";
  o.model = "mlp:6,8,3";
  EXPECT_TRUE(absl::StrContains(Problem(o), "holds features f32 [2,3]")) << Problem(o);
  o.eval_dataset = TmpPath("nowhere");
  EXPECT_TRUE(absl::StrContains(Problem(o), "--eval_dataset")) << Problem(o);
  o.eval_dataset = "";
  o.dataset = TmpPath("empty-dataset-dir");
  mkdir(o.dataset.c_str(), 0755);
  EXPECT_TRUE(absl::StrContains(Problem(o), "no *.tshard files")) << Problem(o);
}

TEST(LocalOptionsTest, OtherFieldsChecked) {
  LocalOptions o;
  o.optimizer = "lion";
  EXPECT_TRUE(absl::StrContains(Problem(o), "unknown --optimizer 'lion'")) << Problem(o);
  o = LocalOptions{};
  o.epochs = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--epochs")) << Problem(o);
  o = LocalOptions{};
  o.batch_size = -1;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--batch_size")) << Problem(o);
  o = LocalOptions{};
  o.lr = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--lr")) << Problem(o);
  o = LocalOptions{};
  o.backend = "tpu";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--backend")) << Problem(o);
  o = LocalOptions{};
  o.straggler_threshold = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--straggler_threshold")) << Problem(o);
  o = LocalOptions{};
  o.straggler_window = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--straggler_window")) << Problem(o);
}

// A negative value was dropped for the worker's default before (a
// --max_steps -5 run trained every epoch).
TEST(LocalOptionsTest, NegativeValuesRefused) {
  LocalOptions o;
  o.max_steps = -5;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--max_steps must not be negative (got -5)"))
      << Problem(o);
  o = LocalOptions{};
  o.warmup_steps = -2;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--warmup_steps must not be negative")) << Problem(o);
  o = LocalOptions{};
  o.weight_decay = -0.1;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--weight_decay must not be negative")) << Problem(o);
  o = LocalOptions{};
  o.accumulation = -1;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--accumulation")) << Problem(o);
  o = LocalOptions{};
  o.heartbeat_misses = 0;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--heartbeat_misses")) << Problem(o);
}

TEST(LocalOptionsTest, CudaNeedsAGpuPerWorker) {
  const std::string dev = TmpPath("dev");
  ASSERT_EQ(mkdir(dev.c_str(), 0755), 0);
  LocalOptions o;
  o.backend = "cuda";
  o.workers = 2;
  absl::Status s = CheckBackendDevices(o, dev);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "this machine has no GPU")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--backend cpu")) << s;
  std::ofstream(dev + "/nvidia0").put('\n');
  EXPECT_EQ(CountGpuDevices(dev), 1);
  s = CheckBackendDevices(o, dev);
  EXPECT_TRUE(absl::StrContains(s.message(), "2 workers need 2 GPUs")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "has 1; use --workers 1")) << s;
  std::ofstream(dev + "/nvidia1").put('\n');
  EXPECT_TRUE(CheckBackendDevices(o, dev).ok());
  o.backend = "cpu";
  EXPECT_TRUE(CheckBackendDevices(o, TmpPath("no-such-dev")).ok());
}

TEST(LocalOptionsTest, AutotuneRefusesTheFlagsItChooses) {
  LocalOptions o;
  o.autotune = true;
  EXPECT_EQ(Problem(o), "");
  o.sync = "zero2";
  EXPECT_TRUE(absl::StrContains(Problem(o), "--autotune chooses --sync")) << Problem(o);
  o = LocalOptions{};
  o.autotune = true;
  o.bucket_cap_mb = 4;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--autotune chooses")) << Problem(o);
  o.bucket_cap_mb = -1;
  o.autotune_steps = 2;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--autotune_steps must be at least 5")) << Problem(o);
}

TEST(LocalOptionsTest, PrecisionCheckedAgainstTheStrategy) {
  LocalOptions o;
  o.precision = "fp8";
  EXPECT_TRUE(absl::StrContains(Problem(o), "unknown --precision 'fp8'")) << Problem(o);
  o.precision = "fp16";
  EXPECT_EQ(Problem(o), "");
  o.sync = "ps";
  o.shard_servers = 1;
  EXPECT_TRUE(absl::StrContains(Problem(o), "steps on the shard servers in fp32")) << Problem(o);
  o.precision = "fp32";
  EXPECT_EQ(Problem(o), "");
}

TEST(LocalOptionsTest, OccupiedPortRejectedFreePortAccepted) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  LocalOptions o;
  o.port = ntohs(addr.sin_port);
  EXPECT_TRUE(absl::StrContains(Problem(o), absl::StrCat("port ", o.port, " on 127.0.0.1 is not free")))
      << Problem(o);
  close(fd);
  EXPECT_EQ(Problem(o), "");  // the same port once released
  o.port = 70000;
  EXPECT_TRUE(absl::StrContains(Problem(o), "--port must be")) << Problem(o);
}

TEST(FindServiceBinaryTest, BinDirFlatAndBazelLayout) {
  const std::string flat = TmpPath("bin-flat");
  const std::string tree = TmpPath("bin-tree");
  mkdir(flat.c_str(), 0755);
  mkdir(tree.c_str(), 0755);
  mkdir((tree + "/services").c_str(), 0755);
  mkdir((tree + "/services/worker").c_str(), 0755);
  for (const std::string& p : {flat + "/coordinator", tree + "/services/worker/worker"}) {
    std::ofstream(p) << "#!/bin/sh\n";
    chmod(p.c_str(), 0755);
  }
  auto a = FindServiceBinary("coordinator", flat, "/nonexistent/tandem");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, flat + "/coordinator");
  auto b = FindServiceBinary("worker", tree, "/nonexistent/tandem");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, tree + "/services/worker/worker");
  auto c = FindServiceBinary("dataserver", flat, "/nonexistent/tandem");
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "--bin_dir")) << c.status();
}

}  // namespace
}  // namespace cli
}  // namespace tandem
