#include "tools/tandem/commands.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"

namespace tandem {
namespace cli {
namespace {

absl::Status Usage(const std::string& message, const std::string& help_command) {
  return absl::InvalidArgumentError(
      absl::StrCat(message, "; run `", help_command, " --help`"));
}

// Runs `table` over `args` and turns a stray positional into a usage error.
absl::StatusOr<FlagTable::Parsed> ParseArgs(const FlagTable& table,
                                            const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(FlagTable::Parsed p, table.Parse(args));
  if (!p.help && !p.positionals.empty()) {
    return Usage(absl::StrCat("unexpected argument '", p.positionals.front(), "' for `",
                              table.command(), "` (flags are --name=value)"),
                 table.command());
  }
  return p;
}

}  // namespace

std::vector<CommandInfo> Commands() {
  return {
      {"local", "Train one job on this machine: a coordinator, a data server and N workers."},
      {"status", "Show a running job: state, generation, world size, each worker's progress."},
      {"plan", "Predict step time, memory and link bytes of every strategy on a cluster."},
      {"doctor", "Say where a job's step time goes and which flags would help."},
      {"convert", "Turn .npy arrays, IDX, token or text files into a dataset: tandem convert --help."},
      {"trace", "Merge a --trace run's per-process timelines into RUN_DIR/trace.json (Perfetto)."},
      {"add-worker", "Start one more worker for a running tandem local job (up to --max_workers)."},
      {"exec", "Run a program with the OpenBLAS kernel this CPU needs: tandem exec -- PROG ARGS."},
  };
}

namespace {

void AddClusterFlags(FlagTable* t, LocalOptions* o) {
  t->Section("cluster");
  t->Int("workers", &o->workers, "Worker processes to start (one rank each).");
  t->Int("min_workers", &o->min_workers,
         "Fewest workers a generation may run with after a loss (0 = --workers).");
  t->Int("max_workers", &o->max_workers, "Most workers the coordinator admits (0 = --workers).");
  t->String("host", &o->host, "Interface every process binds and advertises.");
  t->Int("port", &o->port, "Coordinator gRPC port (0 = a free one, printed at start).");
  t->String("job_id", &o->job_id, "Job name (tandem status --job_id).");
  t->Int("heartbeat_ms", &o->heartbeat_ms, "Worker heartbeat period in milliseconds.");
  t->Int("heartbeat_misses", &o->heartbeat_misses,
         "Missed heartbeats after which a worker is lost and the generation ends.");
  t->Double("settle_seconds", &o->settle_seconds,
            "Rendezvous waits this long for more workers before fixing the world.");
  t->Double("straggler_threshold", &o->straggler_threshold,
            "Name a rank a straggler when its step time is this fraction above the other ranks' "
            "median (0.25 = 25% slower).");
  t->Int("straggler_window", &o->straggler_window,
         "Heartbeats in a row a rank must be that slow to be named (and recovered to be cleared).");
}

void AddNodeFlags(FlagTable* t, LocalOptions* o) {
  t->Section("simulated nodes (root: a private network namespace)");
  t->Int("nodes", &o->nodes,
         "Simulated hosts, node n at 127.0.1.n, services at 127.0.1.100 (0 = none: one host).");
  t->Int("workers_per_node", &o->workers_per_node,
         "Workers on each node; --workers = --nodes x this (0 = --workers / --nodes).");
  t->String("link", &o->link,
            "Each node's outgoing link rate, shaped by tc htb: 10gbit, 1gbit, 100mbit (\"\" = unshaped).");
  t->Double("link_delay_ms", &o->link_delay_ms,
            "Added latency per node link via netem, where the kernel has it (0 = none).");
  t->Section("shard servers (--sync ps / hybrid)");
  t->Int("shard_servers", &o->shard_servers,
         "Shard servers to start; with --nodes each is a node of its own (0 = none).");
}

void AddModelAndDataFlags(FlagTable* t, LocalOptions* o) {
  t->Section("model and data");
  t->String("model", &o->model, "Model spec: mlp:IN,HIDDEN,...,OUT (input and output fit the dataset).");
  t->String("dataset", &o->dataset,
            "fashion-mnist or fortunes (under --data_root), or a directory `tandem convert` wrote.");
  t->String("eval_dataset", &o->eval_dataset,
            "A converted directory to evaluate on (\"\" = the dataset's own eval set, if any).");
  t->String("data_root", &o->data_root, "Directory holding the datasets.");
  t->Int("epochs", &o->epochs, "Epochs to train.");
  t->Int("batch_size", &o->batch_size, "Samples per worker per micro-batch.");
  t->String("batch", &o->batch,
            "fixed (\"\" = --batch_size per worker), auto or auto:MIN,MAX: the coordinator picks the "
            "goodput-maximising global batch (gradient noise scale x throughput) and workers follow.");
  t->String("batch_schedule", &o->batch_schedule,
            "STEP:SIZE,...: after optimizer step STEP the global batch is SIZE (forced schedule).");
  t->Int("accumulation", &o->accumulation,
         "Micro-batches per optimizer step (0 = the worker's default, 1).");
  t->Int64("max_steps", &o->max_steps, "Stop after this many optimizer steps (0 = all epochs).");
  t->Int("seed", &o->seed, "Seed for the model initialisation and the data order.");
}

void AddOptimizerFlags(FlagTable* t, LocalOptions* o) {
  t->Section("optimizer");
  t->Double("lr", &o->lr, "Base learning rate for one worker (see --lr_scaling).");
  t->String("optimizer", &o->optimizer, "sgd or adamw.");
  t->String("lr_scaling", &o->lr_scaling,
            "Scale lr with the world size: linear, sqrt or none (\"\" = worker's default, linear).");
  t->String("schedule", &o->schedule,
            "LR schedule: constant, cosine or linear (\"\" = worker's default, cosine).");
  t->Int("warmup_steps", &o->warmup_steps, "Linear warm-up steps (-1 = worker's default, 0).");
  t->Double("momentum", &o->momentum, "SGD momentum (-1 = worker's default, 0.9).");
  t->Double("weight_decay", &o->weight_decay,
            "Weight decay; sgd: L2, adamw: decoupled (-1 = worker's default, 0).");
  t->String("precision", &o->precision,
            "Gradient precision: fp32, bf16 or fp16 (loss-scaled); fp32 master weights (\"\" = fp32).");
}

void AddSyncFlags(FlagTable* t, LocalOptions* o) {
  t->Section("gradient synchronisation");
  t->String("sync", &o->sync,
            "Gradient sync strategy, checked against the registered ones before anything starts.");
  t->String("sync_opt", &o->sync_opt,
            "Strategy options k=v,... (an unknown key is an error that lists the valid ones); "
            "compressed momentum_correction=1 moves --momentum into the strategy (sgd only).");
  t->Bool("autotune", &o->autotune,
          "Before training, time allreduce bucket sizes, hier=1 and zero1/zero2 for a few steps "
          "each; train with the fastest.");
  t->Int("autotune_steps", &o->autotune_steps, "Steps per autotune trial.");
  t->Double("bucket_cap_mb", &o->bucket_cap_mb,
            "MiB of gradients per allreduce bucket (-1 = worker's default, 25).");
  t->String("transport", &o->transport,
            "Collective transport: auto, shm or gloo (\"\" = worker's default, auto = shm here).");
}

void AddRunFlags(FlagTable* t, LocalOptions* o) {
  t->Section("run");
  t->String("backend", &o->backend, "cpu or cuda (worker i uses GPU i).");
  t->Int("log_every", &o->log_every, "Steps between rank 0's progress lines.");
  t->Bool("profile", &o->profile, "Workers print a per-step time breakdown line.");
  t->Bool("trace", &o->trace,
          "Every worker and service records a timeline; merged into RUN_DIR/trace.json at the end "
          "(Perfetto; also tandem trace --run_dir).");
  t->Int("trace_steps", &o->trace_steps, "With --trace: the last steps each process keeps.");
  t->Double("simulate_slow_data_ms", &o->simulate_slow_data_ms,
            "Simulated slow storage: the data server takes at least this many ms per batch (0 = off).");
  t->Int("decode_threads", &o->decode_threads,
         "The data server's threads reading and packing batches (more if tandem doctor says data-bound).");
  t->Bool("doctor", &o->doctor,
          "When the job ends, print where its step time went and what to change (tandem doctor).");
  t->Int("checkpoint_every", &o->checkpoint_every,
         "Steps between checkpoints (-1 = worker's default, 500; 0 = only at the end).");
  t->StringList("worker_arg", &o->worker_args,
                "Extra worker flags, comma-separated or repeated (e.g. --worker_arg=--nesterov).");
  t->String("bin_dir", &o->bin_dir,
            "Where the coordinator, dataserver and worker binaries are (\"\" = next to tandem).");
  t->String("run_dir", &o->run_dir,
            "Logs, port files, checkpoints (\"\" = a fresh /tmp/tandem-local-XXXXXX); one run at a "
            "time; the same command again resumes an interrupted run there.");
  t->Bool("keep_going", &o->keep_going,
          "Leave a dead worker to the coordinator (survivors re-join) instead of stopping all.");
  t->Bool("tls", &o->tls,
          "Mutual TLS on every RPC: a CA made for the run signs one certificate (<run_dir>/tls).");
  t->Int("max_restarts", &o->max_restarts,
         "Restarts of a coordinator or data server that dies mid-run, in all (0 = none).");
  t->Seconds("grace_seconds", &o->grace, "Wait between SIGTERM and SIGKILL when stopping processes.");
}

}  // namespace

FlagTable LocalFlags(LocalOptions* o) {
  FlagTable t("tandem local",
              "Starts a coordinator, a data server and --workers worker processes on this "
              "machine,\nprints rank 0's progress and the test accuracy at each epoch end, and "
              "stops every\nprocess when the job ends, fails or is interrupted (Ctrl-C).");
  AddClusterFlags(&t, o);
  AddNodeFlags(&t, o);
  AddModelAndDataFlags(&t, o);
  AddOptimizerFlags(&t, o);
  AddSyncFlags(&t, o);
  AddRunFlags(&t, o);
  return t;
}

FlagTable StatusFlags(StatusOptions* o) {
  FlagTable t("tandem status",
              "Asks a running coordinator for its job: state, generation, world size, restarts,\n"
              "the last committed checkpoint and one line per worker (tandem local prints the\n"
              "coordinator address at start).");
  t.String("coordinator", &o->coordinator, "host:port of the coordinator (required).");
  t.String("job_id", &o->job_id, "Job to show.");
  t.Seconds("timeout_seconds", &o->timeout, "Give up when the coordinator has not answered by then.");
  t.String("token_file", &o->token_file,
           "File with the job's token (tandem local writes <run_dir>/token; \"\" = $TANDEM_TOKEN).");
  t.String("tls_ca", &o->tls.ca_file,
           "TLS: the CA certificate the coordinator is verified against (tandem local --tls: <run_dir>/tls/ca.pem).");
  t.String("tls_cert", &o->tls.cert_file, "TLS: this client's certificate (mutual TLS).");
  t.String("tls_key", &o->tls.key_file, "TLS: the private key of --tls_cert.");
  t.String("tls_server_name", &o->tls.server_name,
           "TLS: the name the coordinator's certificate carries (\"\" = its host; tandem local: tandem.job).");
  return t;
}

FlagTable PlanFlags(PlanOptions* o) {
  FlagTable t("tandem plan",
              "Predicts, for every sync strategy, the step time, samples/s, memory per worker\n"
              "and bytes per node link of --model on a cluster of --nodes x --workers_per_node\n"
              "workers,\n"
              "from this machine's measured rates (--calibrate measures them and saves the\n"
              "profile), and recommends the fastest with the term that dominates it.");
  t.String("model", &o->model, "Model spec (mlp:... or gpt:...), as tandem local --model.");
  t.Int("nodes", &o->nodes, "Nodes (hosts) in the cluster.");
  t.Int("workers_per_node", &o->per_node, "Workers per node, as tandem local --workers_per_node.");
  t.Alias("per_node", "workers_per_node");
  t.Int("shard_servers", &o->servers,
        "Shard servers (0 = no ps / hybrid rows), as tandem local --shard_servers.");
  t.Alias("servers", "shard_servers");
  t.Bool("shard_replicas", &o->shard_replicas,
         "ps / hybrid with 2+ servers: each server sends its range to a replica every step (on, "
         "as tandem local's default; false = --sync_opt replicate=0).");
  t.String("link", &o->link, "Each node's link, e.g. 1gbit, 100mbit (\"\" = unshaped loopback).");
  t.String("server_link", &o->server_link, "Each shard server's link (\"\" = --link).");
  t.Int("batch_size", &o->batch_size, "Samples per worker per step.");
  t.String("optimizer", &o->optimizer, "sgd (momentum 0.9) or adamw: optimizer state and step cost.");
  t.Double("bucket_cap_mb", &o->bucket_cap_mb, "MiB per gradient bucket, as --sync_opt bucket_cap_mb.");
  t.Bool("one_host", &o->one_host,
         "Every node is simulated on this machine (tandem local --nodes): workers share its cores.");
  t.Double("cpu_share", &o->cpu_share,
           "With --one_host: the share of this machine's cores the job gets, in (0, 1] (1 = "
           "otherwise idle; 0.5 = other work takes half): the CPU floor of a step divides by it.");
  t.String("profile", &o->profile,
           "Machine profile file (\"\" = $HOME/.config/tandem/plan_profile, else built-in defaults).");
  t.Bool("calibrate", &o->calibrate, "Measure this machine first and save the profile (a few seconds).");
  t.Bool("json", &o->json, "Print the predictions as JSON instead of a table.");
  t.String("gpu", &o->gpu,
           "Plan for GPU workers from datasheet figures: h200, h100 or a100 (8 per node, NVLink, "
           "the reference node's network unless --link); \"\" = this machine's CPU profile.");
  t.String("gpu_math", &o->gpu_math, "The GEMMs' math on --gpu: bf16, tf32 or fp32.");
  t.Double("gpu_efficiency", &o->gpu_efficiency,
           "Achieved / datasheet GEMM rate on --gpu, in (0, 1] (stated in the output).");
  t.Double("tie_fraction", &o->tie_fraction,
           "Step times within this fraction of the fastest are a tie; the recommendation then "
           "takes the one with the least memory per worker.");
  return t;
}

FlagTable DoctorFlags(DoctorCliOptions* o) {
  FlagTable t("tandem doctor",
              "Reads a job's metrics — a tandem local run directory (RUN_DIR/metrics/, kept when\n"
              "the job ends) or the live /metrics addresses tandem local prints — and says where\n"
              "step time goes (compute, communication, data, optimizer), names stragglers, memory\n"
              "and a weak BLAS kernel, and which flags would help, with the numbers.");
  t.String("run_dir", &o->run_dir, "A tandem local run directory (its metrics/ folder).");
  t.StringList("metrics", &o->metrics,
               "Live /metrics addresses (host:port), comma-separated: workers and data servers.");
  t.String("link", &o->link, "Each node's link when shaped (e.g. 100mbit), for % of link rate.");
  t.Seconds("timeout_seconds", &o->timeout, "Per scrape of a live address.");
  return t;
}

FlagTable TraceFlags(TraceCliOptions* o) {
  FlagTable t("tandem trace",
              "Collects the timelines of a tandem local --trace run in --run_dir: asks each\n"
              "process still running to write its trace (SIGUSR1), then merges every process's\n"
              "file into RUN_DIR/trace.json, one track per rank and per service on the\n"
              "coordinator's clock. Open it in https://ui.perfetto.dev or chrome://tracing.");
  t.String("run_dir", &o->run_dir, "The run directory tandem local printed.");
  t.String("dir", &o->dir,
           "Instead: a folder of trace files (processes run with --trace_file=DIR/, e.g. a "
           "compose or Helm volume) to merge into DIR/trace.json.");
  t.Seconds("timeout_seconds", &o->timeout, "How long to wait for each running process's file.");
  return t;
}

FlagTable AddWorkerFlags(AddWorkerCliOptions* o) {
  FlagTable t("tandem add-worker",
              "Starts one more worker for the tandem local job in --run_dir, which must have been\n"
              "started with --max_workers above --workers. The coordinator admits it, ends the\n"
              "running generation at the next step boundary and starts one with the larger world\n"
              "(LR rescaled by --lr_scaling, the data continued at the exact sample). Waits for\n"
              "the worker and exits with its status; its log is RUN_DIR/worker-N.log.");
  t.String("run_dir", &o->run_dir, "The run directory tandem local printed (required).");
  return t;
}

// The registered strategies and their --sync_opt keys, after local's flags.
std::string SyncStrategiesHelp() {
  std::string out = "\nsync strategies (--sync NAME --sync_opt key=value,...):\n";
  for (const sync::StrategyInfo& s : sync::RegisteredStrategies()) {
    absl::StrAppend(&out, "  ", s.name, ": ", s.summary, "\n");
    for (const sync::OptionInfo& k : s.options) {
      absl::StrAppend(&out, "      ", k.key, "=", k.default_value, "  ", k.meaning, "\n");
    }
  }
  absl::StrAppend(&out,
                  "  every strategy also takes bucket_cap_mb (MiB per bucket) and max_grad_norm "
                  "(global clip, 0 = off)\n");
  return out;
}

std::string TopLevelHelp() {
  std::string out =
      "usage: tandem <command> [--flag=value ...]\n"
      "Data-parallel training: a coordinator, data servers and workers.\n\ncommands:\n";
  for (const CommandInfo& c : Commands()) {
    std::string name = "  " + c.name;
    name.resize(std::max<size_t>(13, name.size() + 1), ' ');
    absl::StrAppend(&out, name, c.summary, "\n");
  }
  absl::StrAppend(&out,
                  "\n`tandem <command> --help` lists that command's flags with their defaults.\n");
  return out;
}

namespace {

// A command whose flags need nothing beyond their table.
absl::Status ParseFlags(const FlagTable& t, const std::vector<std::string>& rest,
                        CommandLine* c) {
  ASSIGN_OR_RETURN(FlagTable::Parsed p, ParseArgs(t, rest));
  c->help = p.help;
  if (c->help) c->help_text = t.Help();
  return absl::OkStatus();
}

absl::Status ParseLocal(const std::vector<std::string>& rest, CommandLine* c) {
  FlagTable t = LocalFlags(&c->local);
  ASSIGN_OR_RETURN(FlagTable::Parsed p, ParseArgs(t, rest));
  c->help = p.help;
  if (c->help) {
    c->help_text = t.Help() + SyncStrategiesHelp();
    return absl::OkStatus();
  }
  return ResolveNodeLayout(&c->local, p.Given("nodes"), p.Given("workers"));
}

absl::Status ParseConvert(const std::vector<std::string>& rest, CommandLine* c) {
  FlagTable t = ConvertFlags(&c->convert);
  ASSIGN_OR_RETURN(FlagTable::Parsed p, ParseArgs(t, rest));
  c->help = p.help;
  if (c->help) c->help_text = t.Help();
  c->convert.given = p.given;
  return absl::OkStatus();
}

// main.cc runs `tandem exec -- PROG` itself; only its help comes here.
void ExecHelp(CommandLine* c) {
  c->help = true;
  c->help_text =
      "usage: tandem exec [--] PROGRAM [ARGS...]\n"
      "Runs PROGRAM with the OPENBLAS_CORETYPE this CPU needs when OpenBLAS would pick a\n"
      "weaker kernel (what tandem local gives its workers); a value already set in the\n"
      "environment is kept. The exit status is PROGRAM's (127 if it cannot be run).\n"
      "Container entrypoints use it: deploy/docker.\n";
}

// The words after `command` into c's options for it.
absl::Status ParseCommand(const std::string& command, const std::vector<std::string>& rest,
                          CommandLine* c) {
  c->command = command;
  if (command == "local") return ParseLocal(rest, c);
  if (command == "status") return ParseFlags(StatusFlags(&c->status), rest, c);
  if (command == "exec") {
    ExecHelp(c);
    return absl::OkStatus();
  }
  if (command == "doctor") return ParseFlags(DoctorFlags(&c->doctor), rest, c);
  if (command == "add-worker" || command == "add_worker") {
    c->command = "add-worker";
    return ParseFlags(AddWorkerFlags(&c->add_worker), rest, c);
  }
  if (command == "trace") return ParseFlags(TraceFlags(&c->trace), rest, c);
  if (command == "convert") return ParseConvert(rest, c);
  if (command == "plan") return ParseFlags(PlanFlags(&c->plan), rest, c);
  std::string names;
  for (const CommandInfo& info : Commands()) absl::StrAppend(&names, names.empty() ? "" : ", ", info.name);
  return Usage(absl::StrCat("unknown command '", command, "' (commands: ", names, ")"), "tandem");
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine c;
  if (args.empty()) return Usage("no command given", "tandem");
  std::string command = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "-h" || command == "--help" || command == "-help" || command == "help") {
    // `tandem help local` = `tandem local --help`.
    if (command != "help" || rest.empty()) {
      c.help = true;
      c.help_text = TopLevelHelp();
      return c;
    }
    command = rest.front();
    rest = {"--help"};
  }
  if (command.rfind("-", 0) == 0) {
    return Usage(absl::StrCat("put the command first (tandem local ", command, " ...), got flag ",
                              command, " before any command"),
                 "tandem");
  }
  RETURN_IF_ERROR(ParseCommand(command, rest, &c));
  return c;
}

}  // namespace cli
}  // namespace tandem
