// LocalOptions: everything `tandem local` needs to start a training job on
// this machine (a coordinator, one data server and N worker processes), and
// the checks that run before anything starts.
//
//   LocalOptions o;                      // defaults: 4 workers, Fashion-MNIST
//   o.workers = 2;
//   RETURN_IF_ERROR(ValidateLocalOptions(o));   // one line saying what to fix
//   ASSIGN_OR_RETURN(DatasetFiles d, ResolveDataset(o));
//
// Thread-safe (pure functions, except that validation probes the file
// system and, for a fixed --port, binds the port once to see that it is free).
#ifndef TANDEM_TOOLS_TANDEM_LOCAL_OPTIONS_H_
#define TANDEM_TOOLS_TANDEM_LOCAL_OPTIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data/dataset_inputs.h"

namespace tandem {
namespace cli {

struct LocalOptions {
  // --- cluster ---
  int workers = 4;             // worker processes started
  int min_workers = 0;         // coordinator --min_workers; 0 = workers
  int max_workers = 0;         // coordinator --max_workers; 0 = workers
  std::string host = "127.0.0.1";
  int port = 0;                // coordinator gRPC port; 0 = a free one
  std::string job_id = "local";
  // A worker silent for heartbeat_ms x heartbeat_misses (3 s), or 5 x its
  // step time when longer, is lost: a hang is named within seconds, while a
  // second-long stall of a loaded machine is not. A stall of the
  // coordinator itself blames nobody (services/coordinator/coordinator_core.h).
  int heartbeat_ms = 1000;
  int heartbeat_misses = 3;
  // The coordinator names a rank a straggler when its step time stays this
  // fraction above the other ranks' median for `straggler_window`
  // heartbeats (services/coordinator/straggler_detector.h).
  double straggler_threshold = 0.25;
  int straggler_window = 5;
  double settle_seconds = 0.2;  // all workers are local: they join at once
  // --- simulated nodes (tools/tandem/sim_network.h) ---
  // nodes > 0: a private network namespace with one loopback address per
  // node (127.0.1.n), services at 127.0.1.100, and workers_per_node workers
  // per node (workers == nodes * workers_per_node; see ResolveNodeLayout).
  // 0: every process on `host`, no namespace (the default).
  int nodes = 0;
  int workers_per_node = 0;
  std::string link;            // each node's outgoing rate, e.g. "1gbit"; "" = unshaped
  double link_delay_ms = 0;    // netem delay per node link (kernels with netem only)
  // --- shard servers (services/shardserver), for --sync ps / hybrid ---
  // Started before the workers, which get --shard_servers. With --nodes each
  // server is a node of its own (127.0.1.(nodes + 1 + s), its link shaped
  // like the workers'); otherwise it listens on `host`.
  int shard_servers = 0;
  // --- training (passed to every worker) ---
  std::string model = "mlp:784,1024,1024,10";
  // A name under data_root (fashion-mnist, fortunes) or a directory that
  // `tandem convert` wrote: DIR/train (+ DIR/eval) or DIR itself of shards.
  std::string dataset = "fashion-mnist";
  std::string eval_dataset;    // a converted directory to evaluate on; "" = the dataset's own
  std::string data_root = "/usr/share/datasets";
  int epochs = 2;
  int batch_size = 64;         // per worker
  // Dynamic batch sizing: "" = fixed (batch_size per worker); "auto" or
  // "auto:MIN,MAX" (global samples per optimizer step; auto alone =
  // [batch_size x workers, 8 x that]): the coordinator picks the
  // goodput-maximising global batch, the workers follow at a step boundary.
  std::string batch;
  // "STEP:SIZE,...": a forced global-batch schedule passed to every worker.
  std::string batch_schedule;
  int accumulation = 0;        // 0 = the worker's default
  double lr = 0.05;
  std::string optimizer = "sgd";  // sgd | adamw
  // Optional worker settings: empty / negative = the worker's default.
  std::string lr_scaling;
  std::string schedule;
  int warmup_steps = -1;
  double momentum = -1;
  double weight_decay = -1;
  double bucket_cap_mb = -1;
  std::string precision;       // fp32 | bf16 | fp16; "" = the worker's default (fp32)
  // Gradient synchronisation (common/sync/registry.h): a registered strategy
  // name and its "k=v,..." options, checked before anything starts.
  std::string sync = "allreduce";
  std::string sync_opt;
  bool profile = false;        // workers print a per-step time breakdown
  bool trace = false;          // every process records a timeline; merged into RUN_DIR/trace.json
  int trace_steps = 200;       // with trace: the steps each process keeps, >= 1
  bool autotune = false;       // time a few sync configurations first, train with the fastest
  int autotune_steps = 30;     // steps per autotune trial
  bool tls = false;            // mutual TLS on every RPC, with a CA made for the run
  bool doctor = false;         // print `tandem doctor`'s diagnosis when the job ends
  bool evaluate = true;        // workers measure test accuracy (off for autotune's trials)
  int decode_threads = 2;      // the data server's threads reading and packing batches
  double simulate_slow_data_ms = 0;  // the data server takes at least this long per batch (0 = off)
  std::string transport;       // auto | shm | gloo; "" = the worker's default (auto)
  int checkpoint_every = -1;
  int64_t max_steps = 0;       // 0 = all epochs
  int seed = 1;
  int log_every = 50;
  std::string backend = "cpu";
  // Extra "--flag=value" arguments appended to every worker's command line.
  std::vector<std::string> worker_args;
  // --- supervision ---
  std::string bin_dir;         // where the service binaries are; "" = runfiles
  std::string run_dir;         // logs, port files, state; "" = a fresh /tmp dir
  // True: a worker that dies does not stop the cluster; the coordinator ends
  // the generation and the survivors decide (re-join or exit). See RunLocal
  // for when the run then counts as failed.
  bool keep_going = false;
  // A coordinator or data server that dies mid-run is restarted on its port
  // (the coordinator from its state directory) at most this many times in
  // all; past that the run fails with an error saying so. 0 = never.
  int max_restarts = 3;
  absl::Duration start_timeout = absl::Seconds(60);  // for port files
  absl::Duration grace = absl::Seconds(5);           // SIGTERM -> SIGKILL
};

// The data a named dataset maps to: dataserver "name=path" specs.
struct DatasetFiles {
  std::string train_name;  // e.g. "fashion-mnist/train"
  std::string train_path;  // IDX prefix, e.g. /usr/share/datasets/fashion-mnist/train
  std::string eval_name;   // e.g. "fashion-mnist/t10k"
  std::string eval_path;
  // "" eval_name: no evaluation (a converted directory without eval/).
  // From the description read from the files (the one the workers get):
  int features = 0;        // input elements per sample (tokens: the context)
  int classes = 0;         // classes (tokens: the vocabulary)
  bool tokens = false;     // token windows for a GPT, not dense samples
  data::DatasetInputs inputs;  // the whole description (dtype, shapes)
};

// The data server's --dataset value for `d`: "name=path[,name=path]".
std::string DataServerDatasets(const DatasetFiles& d);

// Fills in the node layout from the flags as given: --nodes N with
// --workers_per_node K sets workers = N*K; --nodes N alone splits --workers
// evenly (workers_per_node = workers / N). InvalidArgument, before anything
// starts, for --nodes given as < 1, a --workers that was given and disagrees
// with N*K, workers that do not split evenly, or --workers_per_node,
// --link or --link_delay_ms without --nodes.
absl::Status ResolveNodeLayout(LocalOptions* o, bool nodes_given, bool workers_given);

// Names `tandem local --dataset` accepts.
std::vector<std::string> KnownDatasets();

// Maps o.dataset to files under o.data_root; NotFound when unknown or the
// files are missing (the message says how to install them). "fortunes" is
// byte-level text (<data_root>/fortunes if present, else
// /usr/share/games/fortunes) cut into windows of the --model gpt: context,
// converted once into a cache (<run_dir>/data-cache, else
// $XDG_CACHE_HOME/tandem or ~/.cache/tandem; see tools/convert/text_cache.h)
// and served as fortunes/train and fortunes/eval, two shard directories;
// features = context, classes = 256. InvalidArgument for a non-GPT model.
// Any other --dataset is a directory `tandem convert` wrote (DIR/train and,
// if present, DIR/eval; or DIR itself holding *.tshard files), served under
// the directories' absolute paths as names; --eval_dataset replaces the
// eval set (DIR2 itself, DIR2/eval, else DIR2/train).
// The description (shape, dtype, classes) is read from the files, as the
// data server will; an eval set whose samples differ is InvalidArgument.
absl::StatusOr<DatasetFiles> ResolveDataset(const LocalOptions& o);

// Every check that can fail before a process starts: counts and ranges, the
// model spec (common/nn parsing, and its input/output widths against the
// dataset), the dataset, the optimizer, backend and transport names, the
// --sync strategy and its --sync_opt keys (the sync registry), negative
// values (refused, never dropped for the default), --backend cuda without
// a GPU per worker (CheckBackendDevices), and a fixed --port being free. InvalidArgument / NotFound / AlreadyExists with one line
// saying what to fix.
absl::Status ValidateLocalOptions(const LocalOptions& o);

// GPUs this machine shows (<dev_dir>/nvidia0, nvidia1, ...).
int CountGpuDevices(const std::string& dev_dir);
// --backend cuda needs a GPU per worker (worker i drives GPU i):
// FAILED_PRECONDITION saying so, instead of workers that fail one by one.
absl::Status CheckBackendDevices(const LocalOptions& o, const std::string& dev_dir);

// --batch's global range {MIN, MAX}; {0, 0} when not auto. InvalidArgument
// for anything but "", "fixed", "auto" or "auto:MIN,MAX" with 1 <= MIN <= MAX.
absl::StatusOr<std::pair<int64_t, int64_t>> ResolveBatchRange(const LocalOptions& o);

// Finds libtandem_bind_source.so (see bind_source_preload.cc) the same way.
absl::StatusOr<std::string> FindBindSourceLibrary(const std::string& bin_dir,
                                                  const std::string& self_exe);

// Finds the service binary `name` ("coordinator", "dataserver", "worker"):
// in bin_dir (flat, or laid out like bazel-bin), else in the runfiles of
// `self_exe`, else in the bazel-bin tree that holds `self_exe`. NotFound
// lists the places tried.
absl::StatusOr<std::string> FindServiceBinary(const std::string& name, const std::string& bin_dir,
                                              const std::string& self_exe);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_LOCAL_OPTIONS_H_
