#include "tools/tandem/local_options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/nn/model_spec.h"
#include "common/data/dataset.h"
#include "common/data/dataset_inputs.h"
#include "common/nn/dataset_fit.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "tools/convert/convert.h"
#include "tools/convert/text_cache.h"
#include "tools/tandem/model_check.h"
#include "tools/tandem/link_rate.h"
#include "tools/tandem/sim_network.h"

namespace tandem {
namespace cli {
namespace {

bool IsFile(const std::string& path) { return access(path.c_str(), R_OK) == 0; }
bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// An IDX pair "<prefix>-images-idx3-ubyte[.gz]" + labels is present.
bool IdxPresent(const std::string& prefix) {
  auto either = [](const std::string& p) { return IsFile(p) || IsFile(p + ".gz"); };
  return either(prefix + "-images-idx3-ubyte") && either(prefix + "-labels-idx1-ubyte");
}

absl::Status CheckPortFree(const std::string& host, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // TIME_WAIT is fine
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("--host=", host, " is not an IPv4 address; use e.g. 127.0.0.1 or 0.0.0.0"));
  }
  const int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  close(fd);
  if (rc != 0) {
    return absl::AlreadyExistsError(absl::StrCat("port ", port, " on ", host, " is not free (",
                                                 std::strerror(err),
                                                 "); pick another --port or use --port=0"));
  }
  return absl::OkStatus();
}

// Where converted text datasets are kept: under the run directory when one
// is given (a test's or a job's own), else the user's cache.
std::string TextCacheRoot(const LocalOptions& o) {
  if (!o.run_dir.empty()) return o.run_dir + "/data-cache";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/tandem");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.cache/tandem");
  }
  return absl::StrCat("/tmp/tandem-cache-", getuid());
}

// "fortunes": the byte-level text of the Debian package `fortunes`, cut into
// windows of the GPT model's context and converted once into the cache.
absl::StatusOr<DatasetFiles> ResolveTextDataset(const LocalOptions& o) {
  auto spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad --model: ", spec.status().message()));
  }
  const bool torchscript = spec->kind == nn::ModelSpec::Kind::kTorchScript;
  const int context = torchscript ? kTorchScriptTextContext : spec->gpt.context;
  if (spec->kind != nn::ModelSpec::Kind::kGpt && !torchscript) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", o.dataset, "' is byte-level text for a GPT model, not for --model ",
        o.model, "; use e.g. --model gpt:layers=4,heads=4,width=256,context=128,vocab=256"));
  }
  // <data_root>/fortunes when present (tests, other copies), else the package's.
  std::string source = absl::StrCat(o.data_root, "/", o.dataset);
  struct stat st;
  if (stat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    source = "/usr/share/games/fortunes";
  }
  auto files = convert::TextFilesIn(source);
  if (absl::IsNotFound(files.status())) {
    return absl::NotFoundError(absl::StrCat(
        "dataset '", o.dataset, "': ", files.status().message(),
        "; run tools/setup.sh (Debian package fortunes) or put text files in ", o.data_root,
        "/", o.dataset));
  }
  if (!files.ok()) return files.status();
  convert::TextCacheOptions c;
  c.sources = *std::move(files);
  c.cache_root = TextCacheRoot(o);
  c.name = o.dataset;
  c.text.seq_len = context;
  auto cached = convert::EnsureTextDataset(c);
  if (!cached.ok()) {
    return absl::Status(cached.status().code(),
                        absl::StrCat("converting dataset '", o.dataset, "' from ", source,
                                     " into ", c.cache_root, ": ", cached.status().message()));
  }
  DatasetFiles f;
  f.train_name = o.dataset + "/train";
  f.train_path = cached->train_dir;
  f.eval_name = o.dataset + "/eval";
  f.eval_path = cached->eval_dir;
  return f;  // features, classes: DescribeFiles reads them from the shards
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The shard directory of a converted dataset DIR for `role` ("train" or
// "eval"): DIR/role, else DIR/<the other role>, else DIR itself (a
// directory of shards); absolute, so every process opens the same files.
std::string ShardDir(const std::string& dir, const std::string& role) {
  char resolved[PATH_MAX];
  std::string abs = realpath(dir.c_str(), resolved) != nullptr ? resolved : dir;
  const std::string other = role == "train" ? "eval" : "train";
  if (IsDir(abs + "/" + role)) return abs + "/" + role;
  if (!IsDir(abs + "/" + other)) return abs;
  return abs + "/" + other;
}

// --dataset=DIR: a directory `tandem convert` wrote.
absl::StatusOr<DatasetFiles> ResolveDirectoryDataset(const LocalOptions& o) {
  if (!IsDir(o.dataset)) {
    return absl::NotFoundError(absl::StrCat(
        "unknown --dataset '", o.dataset, "': neither a known dataset (",
        absl::StrJoin(KnownDatasets(), ", "), ") nor a directory; convert your arrays with "
        "`tandem convert --mode=npy --features=X.npy --labels=Y.npy --out_dir=DIR` and pass "
        "--dataset=DIR"));
  }
  DatasetFiles f;
  f.train_path = ShardDir(o.dataset, "train");
  const std::string eval = ShardDir(o.dataset, "eval");
  if (eval != f.train_path) f.eval_path = eval;
  f.train_name = f.train_path;
  f.eval_name = f.eval_path;
  return f;
}

// Reads the train (and eval) description from the files, checks that the
// two hold the same samples, and fills features / classes / tokens.
absl::Status DescribeFiles(DatasetFiles* f) {
  ASSIGN_OR_RETURN(v1::DatasetInfo train, data::DescribeDataset(f->train_name, f->train_path));
  ASSIGN_OR_RETURN(f->inputs, data::ClassifyDataset(train));
  if (!f->eval_path.empty()) {
    ASSIGN_OR_RETURN(v1::DatasetInfo eval, data::DescribeDataset(f->eval_name, f->eval_path));
    if (eval.feature_spec().SerializeAsString() != train.feature_spec().SerializeAsString() ||
        eval.label_spec().SerializeAsString() != train.label_spec().SerializeAsString()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the eval set ", f->eval_path, " holds features ",
          data::DescribeSpec(eval.feature_spec()), " and labels ",
          data::DescribeSpec(eval.label_spec()), " but the train set ", f->train_path,
          " holds ", data::DescribeSpec(train.feature_spec()), " and ",
          data::DescribeSpec(train.label_spec()), "; convert both with the same shape and dtype"));
    }
  }
  const bool tokens = f->inputs.kind == data::InputKind::kTokens;
  f->tokens = tokens;
  f->features = static_cast<int>(tokens ? f->inputs.context : f->inputs.sample_elements);
  f->classes = f->inputs.num_classes;
  return absl::OkStatus();
}

absl::StatusOr<DatasetFiles> ResolveNamedDataset(const LocalOptions& o) {
  if (o.dataset == "fortunes") return ResolveTextDataset(o);
  DatasetFiles f;
  const std::string dir = absl::StrCat(o.data_root, "/", o.dataset);
  f.train_name = o.dataset + "/train";
  f.train_path = dir + "/train";
  f.eval_name = o.dataset + "/t10k";
  f.eval_path = dir + "/t10k";
  if (!IdxPresent(f.train_path) || !IdxPresent(f.eval_path)) {
    return absl::NotFoundError(absl::StrCat(
        "dataset '", o.dataset, "' not found under ", dir,
        " (expected train-/t10k-{images-idx3,labels-idx1}-ubyte[.gz]); ",
        o.data_root == LocalOptions().data_root
            ? absl::StrCat("run tools/setup.sh (Debian package dataset-", o.dataset,
                           ") or pass --data_root DIR")
            : absl::StrCat("check --data_root ", o.data_root, ": it needs a ", o.dataset,
                           "/ folder with those files")));
  }
  return f;
}

}  // namespace

std::vector<std::string> KnownDatasets() { return {"fashion-mnist", "fortunes"}; }

std::string DataServerDatasets(const DatasetFiles& d) {
  std::string spec = absl::StrCat(d.train_name, "=", d.train_path);
  if (!d.eval_name.empty()) absl::StrAppend(&spec, ",", d.eval_name, "=", d.eval_path);
  return spec;
}

absl::StatusOr<DatasetFiles> ResolveDataset(const LocalOptions& o) {
  bool known = false;
  for (const std::string& d : KnownDatasets()) known = known || d == o.dataset;
  absl::StatusOr<DatasetFiles> f = known ? ResolveNamedDataset(o) : ResolveDirectoryDataset(o);
  if (!f.ok()) return f.status();
  if (!o.eval_dataset.empty()) {
    if (!IsDir(o.eval_dataset)) {
      return absl::NotFoundError(absl::StrCat("--eval_dataset '", o.eval_dataset,
                                              "' is not a directory of shards written by "
                                              "`tandem convert`"));
    }
    f->eval_name = f->eval_path = ShardDir(o.eval_dataset, "eval");
  }
  RETURN_IF_ERROR(DescribeFiles(&*f));
  return f;
}

absl::Status ResolveNodeLayout(LocalOptions* o, bool nodes_given, bool workers_given) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  // --nodes 0 is what --help shows as the default: every process on one
  // host, as when the flag is left out.
  if (nodes_given && o->nodes < 0) {
    return bad("--nodes must not be negative (got ", o->nodes,
               "); 0 (the default) runs every process on one host");
  }
  if (o->nodes == 0) return absl::OkStatus();  // ValidateLocalOptions names stray node flags
  if (o->workers_per_node < 0) {
    return bad("--workers_per_node must be at least 1 (got ", o->workers_per_node, ")");
  }
  if (o->workers_per_node > 0) {
    const int total = o->nodes * o->workers_per_node;
    if (workers_given && o->workers != total) {
      return bad("--workers=", o->workers, " disagrees with --nodes=", o->nodes,
                 " x --workers_per_node=", o->workers_per_node, " = ", total,
                 "; drop --workers or make it ", total);
    }
    o->workers = total;
    return absl::OkStatus();
  }
  if (o->workers < 1 || o->workers % o->nodes != 0) {
    return bad("--workers=", o->workers, " does not split evenly over --nodes=", o->nodes,
               "; pass --workers_per_node");
  }
  o->workers_per_node = o->workers / o->nodes;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> ResolveBatchRange(const LocalOptions& o) {
  if (o.batch.empty() || o.batch == "fixed") return std::pair<int64_t, int64_t>{0, 0};
  const int64_t base = int64_t{o.batch_size} * std::max(1, o.workers) * std::max(1, o.accumulation);
  if (o.batch == "auto") return std::pair<int64_t, int64_t>{base, 8 * base};
  int64_t lo = 0, hi = 0;
  if (absl::StartsWith(o.batch, "auto:")) {
    const std::vector<std::string> parts = absl::StrSplit(o.batch.substr(5), ',');
    if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &lo) && absl::SimpleAtoi(parts[1], &hi) &&
        lo >= 1 && hi >= lo) {
      return std::pair<int64_t, int64_t>{lo, hi};
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--batch ", o.batch, ": use fixed, auto or auto:MIN,MAX (global samples per optimizer "
      "step, 1 <= MIN <= MAX, e.g. auto:128,2048)"));
}

namespace {

// Values whose default is a "not given" sentinel (-1, or 0 = all epochs):
// a negative one the user typed would otherwise be dropped silently and
// the run would use the worker's default instead.
absl::Status ValidateNonNegative(const LocalOptions& o) {
  const LocalOptions d;
  auto bad = [](const char* flag, auto value, const char* meaning) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must not be negative (got ",
                                                   value, "); ", meaning));
  };
  if (o.max_steps < 0) return bad("max_steps", o.max_steps, "0 (the default) trains every epoch");
  if (o.checkpoint_every < 0 && o.checkpoint_every != d.checkpoint_every) {
    return bad("checkpoint_every", o.checkpoint_every, "0 turns checkpoints off");
  }
  if (o.warmup_steps < 0 && o.warmup_steps != d.warmup_steps) {
    return bad("warmup_steps", o.warmup_steps, "0 turns warm-up off");
  }
  if (o.accumulation < 0) return bad("accumulation", o.accumulation, "1 syncs every micro-batch");
  if (o.momentum < 0 && o.momentum != d.momentum) {
    return bad("momentum", o.momentum, "0 turns momentum off");
  }
  if (o.weight_decay < 0 && o.weight_decay != d.weight_decay) {
    return bad("weight_decay", o.weight_decay, "0 turns weight decay off");
  }
  if (o.bucket_cap_mb < 0 && o.bucket_cap_mb != d.bucket_cap_mb) {
    return bad("bucket_cap_mb", o.bucket_cap_mb, "give a size in MiB");
  }
  if (o.heartbeat_misses < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat_misses must be at least 1 (got ", o.heartbeat_misses, ")"));
  }
  if (o.settle_seconds < 0) return bad("settle_seconds", o.settle_seconds, "0 forms at once");
  return absl::OkStatus();
}

}  // namespace

int CountGpuDevices(const std::string& dev_dir) {
  int n = 0;
  struct stat st;
  while (stat(absl::StrCat(dev_dir, "/nvidia", n).c_str(), &st) == 0) ++n;
  return n;
}

absl::Status CheckBackendDevices(const LocalOptions& o, const std::string& dev_dir) {
  if (o.backend != "cuda") return absl::OkStatus();
  const int gpus = CountGpuDevices(dev_dir);
  if (gpus == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--backend cuda: this machine has no GPU (no ", dev_dir,
        "/nvidia0 device); use --backend cpu, or run on a machine with a GPU and its driver"));
  }
  if (o.workers > gpus) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--backend cuda: ", o.workers, " workers need ", o.workers, " GPUs (worker i drives GPU "
        "i), but this machine has ", gpus, "; use --workers ", gpus, " or fewer"));
  }
  return absl::OkStatus();
}

namespace {

template <typename... Parts>
absl::Status Bad(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

absl::Status ValidateBatchSchedule(const std::string& schedule) {
  if (schedule.empty()) return absl::OkStatus();
  int64_t last = 0;
  for (absl::string_view item : absl::StrSplit(schedule, ',')) {
    const std::vector<std::string> kv = absl::StrSplit(item, ':');
    int64_t step = 0, size = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &step) || !absl::SimpleAtoi(kv[1], &size) ||
        step <= last || size < 1) {
      return Bad("--batch_schedule: '", item, "' is not STEP:SIZE with steps increasing from 1 "
                 "and a global batch >= 1 (e.g. 100:256,300:512)");
    }
    last = step;
  }
  return absl::OkStatus();
}

// Workers, the data servers' threads, simulated nodes and their links.
absl::Status ValidateLayout(const LocalOptions& o) {
  if (o.workers < 1) return Bad("--workers must be at least 1 (got ", o.workers, ")");
  if (!(o.simulate_slow_data_ms >= 0) || o.simulate_slow_data_ms > 60000) {
    return Bad("--simulate_slow_data_ms must be 0..60000 (got ", o.simulate_slow_data_ms, ")");
  }
  if (o.decode_threads < 1 || o.decode_threads > 256) {
    return Bad("--decode_threads must be between 1 and 256 (got ", o.decode_threads, ")");
  }
  if (o.nodes < 0 || o.nodes > kMaxSimulatedNodes) {
    return Bad("--nodes must be 1..", kMaxSimulatedNodes, " (got ", o.nodes, ")");
  }
  if (o.nodes == 0) {
    if (o.workers_per_node != 0) return Bad("--workers_per_node needs --nodes");
    if (!o.link.empty()) return Bad("--link needs --nodes (links are between simulated nodes)");
    if (o.link_delay_ms != 0) return Bad("--link_delay_ms needs --nodes");
    return absl::OkStatus();
  }
  if (o.workers_per_node < 1 || o.workers != o.nodes * o.workers_per_node) {
    return Bad("--workers=", o.workers, " is not --nodes=", o.nodes, " x --workers_per_node=",
               o.workers_per_node, "; give --nodes and --workers_per_node only");
  }
  if (!o.link.empty()) {
    auto rate = ParseLinkRate(o.link);
    if (!rate.ok()) return rate.status();
  }
  if (o.host != LocalOptions().host) {
    return Bad("--host=", o.host, " has no effect with --nodes (node n is 127.0.1.n, the "
               "services 127.0.1.100); drop --host");
  }
  if (o.link_delay_ms < 0) {
    return Bad("--link_delay_ms must not be negative (got ", o.link_delay_ms, ")");
  }
  return absl::OkStatus();
}

// Shard servers, elastic membership bounds and restarts.
absl::Status ValidateMembership(const LocalOptions& o) {
  if (o.shard_servers < 0 || o.nodes + o.shard_servers > kMaxSimulatedNodes) {
    return Bad("--shard_servers must be 0..", kMaxSimulatedNodes - o.nodes, " (got ",
               o.shard_servers, ")");
  }
  if ((o.sync == "ps" || o.sync == "hybrid") && o.shard_servers < 1) {
    return Bad("--sync ", o.sync, " needs shard servers: add --shard_servers N (N >= 1)");
  }
  const int min = o.min_workers == 0 ? o.workers : o.min_workers;
  const int max = o.max_workers == 0 ? o.workers : o.max_workers;
  if (min < 1) return Bad("--min_workers must be at least 1 (got ", min, ")");
  if (min > max) {
    return Bad("--min_workers (", min, ") is greater than --max_workers (", max,
               "); make min <= max");
  }
  if (min > o.workers) {
    return Bad("--min_workers (", min, ") is more than the ", o.workers,
               " worker(s) started; lower it or raise --workers");
  }
  if (o.max_restarts < 0) {
    return Bad("--max_restarts must not be negative (got ", o.max_restarts, ")");
  }
  return absl::OkStatus();
}

// Epochs, batch, learning rate, optimizer, precision, autotune, backend and
// transport.
absl::Status ValidateTraining(const LocalOptions& o) {
  if (o.trace_steps < 1) {
    return Bad("--trace_steps must be at least 1 (got ", o.trace_steps, "): the steps each "
               "process keeps in its trace");
  }
  if (o.epochs < 1) return Bad("--epochs must be at least 1 (got ", o.epochs, ")");
  if (o.batch_size < 1) return Bad("--batch_size must be at least 1 (got ", o.batch_size, ")");
  if (!(o.lr > 0)) return Bad("--lr must be positive (got ", o.lr, ")");
  if (o.optimizer != "sgd" && o.optimizer != "adamw") {
    return Bad("unknown --optimizer '", o.optimizer, "'; use sgd or adamw");
  }
  if (!o.precision.empty() && o.precision != "fp32" && o.precision != "bf16" &&
      o.precision != "fp16") {
    return Bad("unknown --precision '", o.precision, "'; use fp32, bf16 or fp16");
  }
  if (!o.precision.empty() && o.precision != "fp32" && (o.sync == "ps" || o.sync == "hybrid")) {
    return Bad("--precision ", o.precision, " needs a strategy that steps on the workers; --sync ",
               o.sync, " steps on the shard servers in fp32 (use --precision fp32)");
  }
  if (o.autotune && (o.sync != LocalOptions().sync || !o.sync_opt.empty() || o.bucket_cap_mb > 0)) {
    return Bad("--autotune chooses --sync, --sync_opt and the bucket size itself: drop those "
               "flags, or drop --autotune to run the configuration you gave");
  }
  if (o.autotune && o.autotune_steps < 5) {
    return Bad("--autotune_steps must be at least 5 (got ", o.autotune_steps, ") to time a step");
  }
  if (o.backend != "cpu" && o.backend != "cuda") {
    return Bad("unknown --backend '", o.backend, "'; use cpu or cuda");
  }
  if (!o.transport.empty() && o.transport != "auto" && o.transport != "shm" &&
      o.transport != "gloo") {
    return Bad("unknown --transport '", o.transport, "'; use auto, shm or gloo");
  }
  // The strategy registry's own messages name the registered strategies and
  // a strategy's keys. --bucket_cap_mb, when set, is the value the worker
  // uses, so it is the one checked.
  auto sync_options = sync::ParseSyncOptions(o.sync, o.sync_opt);
  if (!sync_options.ok()) return sync_options.status();
  if (o.bucket_cap_mb > 0) sync_options->bucket_cap_mb = o.bucket_cap_mb;
  return sync::ValidateSyncOptions(*sync_options);
}

// The model parses, fits the dataset and suits the strategy.
absl::Status ValidateModelOnData(const LocalOptions& o) {
  auto spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) return Bad("bad --model: ", spec.status().message());
  auto data = ResolveDataset(o);
  if (!data.ok()) return data.status();
  if (absl::Status fit = nn::CheckModelFitsDataset(*spec, data->inputs); !fit.ok()) {
    return Bad("--model ", o.model, " does not fit dataset '", o.dataset, "': ", fit.message());
  }
  if (absl::Status s = CheckModelOnDataset(*spec, data->inputs, o.sync); !s.ok()) {
    return Bad("--model ", o.model, ": ", s.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLocalOptions(const LocalOptions& o) {
  RETURN_IF_ERROR(ResolveBatchRange(o).status());
  RETURN_IF_ERROR(ValidateNonNegative(o));
  RETURN_IF_ERROR(ValidateBatchSchedule(o.batch_schedule));
  RETURN_IF_ERROR(ValidateLayout(o));
  RETURN_IF_ERROR(ValidateMembership(o));
  RETURN_IF_ERROR(ValidateTraining(o));
  if (o.port < 0 || o.port > 65535) return Bad("--port must be 0..65535 (got ", o.port, ")");
  if (o.heartbeat_ms < 1) return Bad("--heartbeat_ms must be positive");
  if (!(o.straggler_threshold > 0) || o.straggler_window < 1) {
    return Bad("--straggler_threshold must be a positive fraction (0.25 = 25% slower) and "
               "--straggler_window at least 1 heartbeat");
  }
  if (o.log_every < 1) return Bad("--log_every must be at least 1");
  RETURN_IF_ERROR(ValidateModelOnData(o));
  RETURN_IF_ERROR(CheckBackendDevices(o, "/dev"));
  if (o.port != 0) return CheckPortFree(o.host, o.port);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FindBindSourceLibrary(const std::string& bin_dir,
                                                  const std::string& self_exe) {
  const std::string name = "libtandem_bind_source.so";
  const std::string rel = "tools/tandem/" + name;
  std::vector<std::string> tried;
  if (!bin_dir.empty()) {
    tried = {bin_dir + "/" + name, bin_dir + "/" + rel, bin_dir + "/tandem/" + rel};
  } else {
    const std::string dir = self_exe.substr(0, self_exe.rfind('/'));
    tried = {self_exe + ".runfiles/tandem/" + rel, dir + "/" + name};
  }
  for (const std::string& p : tried) {
    if (IsFile(p)) return p;
  }
  return absl::NotFoundError(absl::StrCat("cannot find ", name, " (tried ",
                                          absl::StrJoin(tried, ", "),
                                          "); build //tools/tandem or pass --bin_dir"));
}

absl::StatusOr<std::string> FindServiceBinary(const std::string& name, const std::string& bin_dir,
                                              const std::string& self_exe) {
  const std::string rel = absl::StrCat("services/", name, "/", name);
  std::vector<std::string> tried;
  if (!bin_dir.empty()) {
    tried = {bin_dir + "/" + name, bin_dir + "/" + rel, bin_dir + "/tandem/" + rel};
  } else {
    const std::string dir = self_exe.substr(0, self_exe.rfind('/'));
    tried = {self_exe + ".runfiles/tandem/" + rel,     // bazel-bin/tools/tandem/tandem
             dir + "/../../" + rel,                     // sibling in bazel-bin
             dir + "/" + name};                         // installed side by side
  }
  for (const std::string& p : tried) {
    if (IsExecutable(p)) return p;
  }
  return absl::NotFoundError(absl::StrCat("cannot find the ", name, " binary (tried ",
                                          absl::StrJoin(tried, ", "),
                                          "); build //services/", name, " or pass --bin_dir"));
}

}  // namespace cli
}  // namespace tandem
