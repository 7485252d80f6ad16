// The tandem command line: its commands, one FlagTable per command (the only
// place a flag, its default and its meaning are written down), and the parse
// of a whole `tandem <command> [flags]` into options.
//
//   ASSIGN_OR_RETURN(CommandLine c, ParseCommandLine({"local", "--workers", "2"}));
//   if (c.help) { std::fputs(c.help_text.c_str(), stdout); return 0; }
//   if (c.command == "local") RunLocal(c.local, env);
//
// Usage errors (exit status 2 in main.cc) are INVALID_ARGUMENT: no or an
// unknown command, an unknown flag (named, with a pointer to that command's
// --help), a missing or unparsable value, a stray positional argument.
// Checks of the values themselves (ranges, names, files, --sync) are
// ValidateLocalOptions's, not this file's.
// Thread-safe (pure functions; each call builds its own tables).
#ifndef TANDEM_TOOLS_TANDEM_COMMANDS_H_
#define TANDEM_TOOLS_TANDEM_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/tls.h"
#include "tools/tandem/convert_command.h"
#include "tools/tandem/flag_table.h"
#include "tools/tandem/local_options.h"

namespace tandem {
namespace cli {

struct StatusOptions {
  std::string coordinator;     // host:port; required
  std::string job_id = "local";
  absl::Duration timeout = absl::Seconds(5);
  std::string token_file;      // the job's token (tandem local: <run_dir>/token)
  TlsOptions tls;              // all empty = plain text
};

// `tandem plan`: predicted step time and memory per strategy (common/plan).
struct PlanOptions {
  std::string model = "mlp:784,1024,1024,10";
  int nodes = 1;
  int per_node = 1;               // workers per node
  int servers = 0;                // shard servers (ps, hybrid)
  bool shard_replicas = true;     // ps / hybrid: --sync_opt replicate (on by default)
  std::string link;               // per node, e.g. "1gbit"; "" = unshaped loopback
  std::string server_link;        // "" = --link
  int batch_size = 64;            // per worker per step
  std::string optimizer = "sgd";
  double bucket_cap_mb = 25;
  bool one_host = false;          // every node simulated on this machine
  double cpu_share = 1;           // one_host: the share of this host's cores the job gets
  std::string profile;            // machine profile file; "" = the default path
  bool calibrate = false;         // measure this machine, save the profile, then plan
  bool json = false;
  std::string gpu;                // "" = the CPU profile; h200, h100, a100: datasheet GPU profile
  std::string gpu_math = "bf16";  // bf16, tf32 or fp32 GEMMs on --gpu
  double gpu_efficiency = 0.5;    // achieved / datasheet GEMM rate on --gpu
  // Strategies whose step times are within this fraction of the fastest
  // are a tie: the recommendation takes the one needing least memory.
  double tie_fraction = 0.03;
};

// `tandem doctor`: where a job's step time goes and what to change.
struct DoctorCliOptions {
  std::string run_dir;               // a tandem local run directory (finished or running)
  std::vector<std::string> metrics;  // live /metrics addresses (host:port)
  std::string link;                  // each node's link, when shaped (e.g. 100mbit)
  absl::Duration timeout = absl::Seconds(5);
};

// `tandem trace`: merge a --trace run's timelines (trace_command.h).
struct TraceCliOptions {
  std::string run_dir;  // the run directory tandem local printed
  std::string dir;      // or: a folder of trace files (--trace_file=DIR/) to merge
  absl::Duration timeout = absl::Seconds(10);
};

// `tandem add-worker`: one more worker for a running tandem local job.
struct AddWorkerCliOptions {
  std::string run_dir;  // the run directory tandem local printed; required
};

struct CommandInfo {
  std::string name;     // "local"
  std::string summary;  // one line
};

// Every command, in the order `tandem --help` lists them.
std::vector<CommandInfo> Commands();

// The tables; parsing writes into *o, and Help() shows *o's values as the
// defaults, so pass default-constructed options.
FlagTable LocalFlags(LocalOptions* o);
FlagTable StatusFlags(StatusOptions* o);
FlagTable PlanFlags(PlanOptions* o);
FlagTable DoctorFlags(DoctorCliOptions* o);
FlagTable AddWorkerFlags(AddWorkerCliOptions* o);
FlagTable TraceFlags(TraceCliOptions* o);

// `tandem --help`: the commands, one line each, and how to get more.
std::string TopLevelHelp();

struct CommandLine {
  std::string command;  // "local", "status", "plan", "doctor" or "add-worker"; "" with help = the top level
  bool help = false;    // print help_text to stdout, exit 0
  std::string help_text;
  LocalOptions local;
  StatusOptions status;
  PlanOptions plan;
  DoctorCliOptions doctor;
  AddWorkerCliOptions add_worker;
  TraceCliOptions trace;
  ConvertCliOptions convert;
};

// `args` are the words after the program name: the command first, then its
// flags (dashes or underscores in names). `tandem help [command]` and
// `tandem [command] --help` / `-h` give help.
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_COMMANDS_H_
