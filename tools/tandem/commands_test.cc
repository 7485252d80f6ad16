#include "tools/tandem/commands.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

using Args = std::vector<std::string>;

std::string HelpOf(const Args& args) {
  auto c = ParseCommandLine(args);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return "";
  EXPECT_TRUE(c->help);
  return c->help_text;
}

std::string ErrorOf(const Args& args) {
  auto c = ParseCommandLine(args);
  EXPECT_FALSE(c.ok()) << "parsed: " << absl::StrJoin(args, " ");
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST(CommandsTest, TopLevelHelpListsEachCommandOnOneLine) {
  for (const Args& a : {Args{"--help"}, Args{"-h"}, Args{"help"}}) {
    const std::string help = HelpOf(a);
    EXPECT_TRUE(absl::StartsWith(help, "usage: tandem <command>")) << help;
    for (const CommandInfo& c : Commands()) {
      EXPECT_TRUE(absl::StrContains(help, absl::StrCat("  ", c.name, " ")) &&
                  absl::StrContains(help, c.summary + "\n"))
          << c.name << " in\n" << help;
    }
    EXPECT_TRUE(absl::StrContains(help, "local")) << help;
    EXPECT_TRUE(absl::StrContains(help, "status")) << help;
    EXPECT_FALSE(absl::StrContains(help, "--workers")) << "flags belong to the commands";
  }
}

TEST(CommandsTest, AddWorkerTakesTheRunDirectory) {
  auto c = ParseCommandLine({"add-worker", "--run_dir", "/tmp/run"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->command, "add-worker");
  EXPECT_EQ(c->add_worker.run_dir, "/tmp/run");
  auto underscore = ParseCommandLine({"add_worker", "--run-dir=/tmp/r2"});
  ASSERT_TRUE(underscore.ok()) << underscore.status();
  EXPECT_EQ(underscore->command, "add-worker");
  EXPECT_EQ(underscore->add_worker.run_dir, "/tmp/r2");
  auto bad = ParseCommandLine({"add-worker", "--workers=2"});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "workers")) << bad.status();
  auto help = ParseCommandLine({"add-worker", "--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(absl::StrContains(help->help_text, "--run_dir")) << help->help_text;
}

TEST(CommandsTest, LocalHelpListsEveryFlagItParsesWithItsDefault) {
  const std::string help = HelpOf({"local", "--help"});
  EXPECT_TRUE(absl::StartsWith(help, "usage: tandem local")) << help;
  LocalOptions defaults;
  FlagTable table = LocalFlags(&defaults);
  ASSERT_GT(table.flags().size(), 30u);
  for (const FlagTable::Flag& f : table.flags()) {
    const std::string shown =
        absl::StrCat("  --", f.name, "=", f.default_text.empty() ? "\"\"" : f.default_text);
    EXPECT_TRUE(absl::StrContains(help, shown)) << shown << " in\n" << help;
    EXPECT_FALSE(f.meaning.empty()) << f.name;
  }
  for (const char* named : {"  --workers=4 ", "  --sync=allreduce ", "  --sync_opt=\"\" ",
                            "  --profile=false ", "  --bucket_cap_mb=-1 ", "  --transport=\"\" ",
                            "  --min_workers=0 ", "  --batch_size=64 ", "  --keep_going=false "}) {
    EXPECT_TRUE(absl::StrContains(help, named)) << named << " in\n" << help;
  }
  // All workers of `tandem local` are one node; status's flags are its own.
  EXPECT_EQ(table.Find("node_id"), nullptr);
  EXPECT_FALSE(absl::StrContains(help, "--coordinator=")) << help;
  EXPECT_EQ(HelpOf({"help", "local"}), help);
  EXPECT_EQ(HelpOf({"local", "--workers=2", "-h"}), help);
}

TEST(CommandsTest, StatusHelpListsItsOwnFlags) {
  const std::string help = HelpOf({"status", "--help"});
  EXPECT_TRUE(absl::StartsWith(help, "usage: tandem status")) << help;
  for (const char* named : {"  --coordinator=\"\" ", "  --job_id=local ", "  --timeout_seconds=5 "}) {
    EXPECT_TRUE(absl::StrContains(help, named)) << named << " in\n" << help;
  }
  EXPECT_FALSE(absl::StrContains(help, "--workers")) << help;
}

TEST(CommandsTest, ConvertHelpListsEveryModesFlagsAndParsesIntoItsOptions) {
  for (const Args& ask : {Args{"convert", "--help"}, Args{"help", "convert"}}) {
    const std::string help = HelpOf(ask);
    EXPECT_TRUE(absl::StartsWith(help, "usage: tandem convert")) << help;
    for (const char* named : {"  --mode=\"\" ", "  --features=", "  --eval_labels=", "  --images=",
                              "  --token_type=u16 ", "  --text_dir=", "  --num_records=1024 "}) {
      EXPECT_TRUE(absl::StrContains(help, named)) << named << " in\n" << help;
    }
  }
  auto c = ParseCommandLine({"convert", "--mode=npy", "--features=x.npy", "--labels", "y.npy",
                             "--out-dir=/o"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->command, "convert");
  EXPECT_EQ(c->convert.mode, "npy");
  EXPECT_EQ(c->convert.features, "x.npy");
  EXPECT_EQ(c->convert.labels, "y.npy");
  EXPECT_EQ(c->convert.out_dir, "/o");
  EXPECT_EQ(c->convert.given, (Args{"mode", "features", "labels", "out_dir"}));
  auto stray = ParseCommandLine({"convert", "x.npy"});
  EXPECT_TRUE(absl::IsInvalidArgument(stray.status())) << stray.status();
}

// Every row of the local table writes the field it is named after: one
// non-default value per flag, then the whole struct is compared.
TEST(CommandsTest, EveryLocalFlagSetsItsField) {
  const Args args = {
      "local", "--workers=3", "--min-workers=2", "--max_workers=5", "--host", "0.0.0.0",
      "--port=7000", "--job_id=j", "--heartbeat_ms=250", "--heartbeat_misses=4",
      "--settle_seconds=1.5", "--straggler_threshold=0.3", "--straggler_window=7", "--nodes=3", "--workers_per_node=1", "--link=1gbit",
      "--link_delay_ms=2", "--shard_servers=2", "--model=mlp:784,32,10", "--dataset=other", "--eval_dataset=/e", "--data_root=/d",
      "--epochs=3", "--batch-size", "16", "--batch=auto:64,512", "--batch_schedule=10:128",
      "--accumulation=2", "--max_steps=99", "--seed=7",
      "--lr=0.1", "--optimizer=adamw", "--lr_scaling=sqrt", "--schedule=constant",
      "--warmup_steps=10", "--momentum=0.8", "--weight_decay=0.01", "--precision=bf16",
      "--sync=zero1", "--autotune", "--autotune_steps=12",
      "--sync_opt=a=1,b=2", "--bucket_cap_mb=8", "--transport=gloo", "--backend=cuda",
      "--log_every=5", "--profile", "--trace", "--trace_steps=7", "--doctor", "--decode_threads=3", "--simulate_slow_data_ms=2.5", "--checkpoint_every=20", "--worker_arg=--x=1,--y=2",
      "--worker-arg=--z", "--bin_dir=/b", "--run_dir=/r", "--keep_going",
      "--tls", "--max_restarts=1", "--grace_seconds=2"};
  auto c = ParseCommandLine(args);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_FALSE(c->help);
  EXPECT_EQ(c->command, "local");
  const LocalOptions& o = c->local;
  EXPECT_EQ(o.workers, 3);
  EXPECT_EQ(o.min_workers, 2);
  EXPECT_EQ(o.max_workers, 5);
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 7000);
  EXPECT_EQ(o.job_id, "j");
  EXPECT_EQ(o.heartbeat_ms, 250);
  EXPECT_EQ(o.heartbeat_misses, 4);
  EXPECT_EQ(o.settle_seconds, 1.5);
  EXPECT_EQ(o.straggler_threshold, 0.3);
  EXPECT_EQ(o.straggler_window, 7);
  EXPECT_EQ(o.nodes, 3);
  EXPECT_EQ(o.workers_per_node, 1);
  EXPECT_EQ(o.link, "1gbit");
  EXPECT_EQ(o.link_delay_ms, 2);
  EXPECT_EQ(o.shard_servers, 2);
  EXPECT_EQ(o.model, "mlp:784,32,10");
  EXPECT_EQ(o.dataset, "other");
  EXPECT_EQ(o.eval_dataset, "/e");
  EXPECT_EQ(o.data_root, "/d");
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.batch_size, 16);
  EXPECT_EQ(o.batch, "auto:64,512");
  EXPECT_EQ(o.batch_schedule, "10:128");
  EXPECT_EQ(o.accumulation, 2);
  EXPECT_EQ(o.max_steps, 99);
  EXPECT_EQ(o.seed, 7);
  EXPECT_EQ(o.lr, 0.1);
  EXPECT_EQ(o.optimizer, "adamw");
  EXPECT_EQ(o.lr_scaling, "sqrt");
  EXPECT_EQ(o.schedule, "constant");
  EXPECT_EQ(o.warmup_steps, 10);
  EXPECT_EQ(o.momentum, 0.8);
  EXPECT_EQ(o.weight_decay, 0.01);
  EXPECT_EQ(o.precision, "bf16");
  EXPECT_TRUE(o.autotune);
  EXPECT_EQ(o.autotune_steps, 12);
  EXPECT_TRUE(o.tls);
  EXPECT_EQ(o.sync, "zero1");
  EXPECT_EQ(o.sync_opt, "a=1,b=2");
  EXPECT_EQ(o.bucket_cap_mb, 8);
  EXPECT_EQ(o.transport, "gloo");
  EXPECT_EQ(o.backend, "cuda");
  EXPECT_EQ(o.log_every, 5);
  EXPECT_TRUE(o.profile);
  EXPECT_TRUE(o.trace);
  EXPECT_EQ(o.trace_steps, 7);
  EXPECT_TRUE(o.doctor);
  EXPECT_EQ(o.decode_threads, 3);
  EXPECT_EQ(o.simulate_slow_data_ms, 2.5);
  EXPECT_EQ(o.checkpoint_every, 20);
  EXPECT_EQ(o.worker_args, (Args{"--x=1", "--y=2", "--z"}));
  EXPECT_EQ(o.bin_dir, "/b");
  EXPECT_EQ(o.run_dir, "/r");
  EXPECT_TRUE(o.keep_going);
  EXPECT_EQ(o.max_restarts, 1);
  EXPECT_EQ(o.grace, absl::Seconds(2));
  // One argument above per row of the table (bar the two spelled with a
  // separate value and the repeated --worker_arg): a new flag needs a line here.
  LocalOptions defaults;
  EXPECT_EQ(LocalFlags(&defaults).flags().size(), args.size() - 1 - 2 - 1);
}

TEST(CommandsTest, TraceFlagsSetTheirFields) {
  auto c = ParseCommandLine({"trace", "--run_dir=/r", "--dir", "/d", "--timeout_seconds=2.5"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->command, "trace");
  EXPECT_EQ(c->trace.run_dir, "/r");
  EXPECT_EQ(c->trace.dir, "/d");
  EXPECT_EQ(c->trace.timeout, absl::Seconds(2.5));
  TraceCliOptions defaults;
  EXPECT_EQ(TraceFlags(&defaults).flags().size(), 3u);
  auto help = ParseCommandLine({"trace", "--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(absl::StrContains(help->help_text, "SIGUSR1")) << help->help_text;
  EXPECT_FALSE(ParseCommandLine({"trace", "--steps=3"}).ok());
}

TEST(CommandsTest, StatusFlagsSetTheirFields) {
  auto c = ParseCommandLine({"status", "--coordinator", "h:1", "--job-id=j", "--timeout_seconds=0.5",
                             "--token_file=/r/token", "--tls_ca=/t/ca.pem", "--tls_cert=/t/n.pem",
                             "--tls_key=/t/n.key", "--tls_server_name=tandem.job"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status.tls.ca_file, "/t/ca.pem");
  EXPECT_EQ(c->status.tls.cert_file, "/t/n.pem");
  EXPECT_EQ(c->status.tls.key_file, "/t/n.key");
  EXPECT_EQ(c->status.tls.server_name, "tandem.job");
  EXPECT_EQ(c->command, "status");
  EXPECT_EQ(c->status.coordinator, "h:1");
  EXPECT_EQ(c->status.job_id, "j");
  EXPECT_EQ(c->status.timeout, absl::Milliseconds(500));
  EXPECT_EQ(c->status.token_file, "/r/token");
}

TEST(CommandsTest, UnknownFlagNamesItAndPointsToThatCommandsHelp) {
  std::string e = ErrorOf({"local", "--wrokers=2"});
  EXPECT_TRUE(absl::StrContains(e, "unknown flag --wrokers for `tandem local`")) << e;
  EXPECT_TRUE(absl::StrContains(e, "did you mean --workers?")) << e;
  EXPECT_TRUE(absl::StrContains(e, "run `tandem local --help`")) << e;
  e = ErrorOf({"status", "--workers=2"});
  EXPECT_TRUE(absl::StrContains(e, "unknown flag --workers for `tandem status`")) << e;
  EXPECT_TRUE(absl::StrContains(e, "`tandem status --help`")) << e;
  e = ErrorOf({"local", "--node_id=1"});
  EXPECT_TRUE(absl::StrContains(e, "unknown flag --node_id")) << e;
}

TEST(CommandsTest, PlanFlagsSetTheirFields) {
  auto c = ParseCommandLine({"plan", "--model=mlp:8,4", "--nodes=4", "--per-node=8", "--servers=2",
                             "--link=100mbit", "--one_host", "--json"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->command, "plan");
  EXPECT_EQ(c->plan.model, "mlp:8,4");
  EXPECT_EQ(c->plan.nodes, 4);
  EXPECT_EQ(c->plan.per_node, 8);
  EXPECT_EQ(c->plan.servers, 2);
  EXPECT_EQ(c->plan.link, "100mbit");
  EXPECT_TRUE(c->plan.one_host);
  EXPECT_TRUE(c->plan.json);
  // tandem local's names for the same things (the old ones above still work).
  c = ParseCommandLine({"plan", "--workers_per_node=3", "--shard_servers=1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->plan.per_node, 3);
  EXPECT_EQ(c->plan.servers, 1);
  EXPECT_TRUE(absl::StrContains(ErrorOf({"plan", "--workers=2"}), "unknown flag --workers"));
}

TEST(CommandsTest, OtherUsageErrors) {
  std::string e = ErrorOf({});
  EXPECT_TRUE(absl::StrContains(e, "no command given")) << e;
  EXPECT_TRUE(absl::StrContains(e, "`tandem --help`")) << e;
  e = ErrorOf({"train"});
  EXPECT_TRUE(absl::StrContains(e, "unknown command 'train' (commands: local, status, plan, doctor, convert, trace, add-worker, exec)")) << e;
  e = ErrorOf({"--workers=2", "local"});
  EXPECT_TRUE(absl::StrContains(e, "put the command first")) << e;
  e = ErrorOf({"local", "extra"});
  EXPECT_TRUE(absl::StrContains(e, "unexpected argument 'extra' for `tandem local`")) << e;
  e = ErrorOf({"local", "--workers"});
  EXPECT_TRUE(absl::StrContains(e, "--workers needs a value")) << e;
  e = ErrorOf({"local", "--workers=two"});
  EXPECT_TRUE(absl::StrContains(e, "--workers=two is not an integer")) << e;
}

}  // namespace
}  // namespace cli
}  // namespace tandem
