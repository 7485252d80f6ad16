#include "tools/tandem/local_run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/io/file.h"
#include "common/kernels/blas_core.h"
#include "common/metrics/scrape.h"
#include "common/rpc/auth.h"
#include "common/rpc/tls.h"
#include "common/rpc/tls_certs.h"
#include "common/status/status_macros.h"
#include "tools/tandem/add_worker.h"
#include "tools/tandem/doctor_command.h"
#include "tools/tandem/job_status.h"
#include "tools/tandem/link_rate.h"
#include "tools/tandem/process.h"
#include "tools/tandem/run_dir.h"
#include "tools/tandem/trace_command.h"
#include "tools/tandem/sim_network.h"

namespace tandem {
namespace cli {
namespace {

constexpr int kTailLines = 15;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

std::string LastLine(const std::string& path) { return Trim(TailOfFile(path, 1)); }

// A process `tandem local` started, with what it needs for supervision.
struct Child {
  std::unique_ptr<Subprocess> process;
  SubprocessOptions spawn;  // how it was started, for a restart
  bool is_worker = false;
  // Set when the coordinator expelled this worker; it is killed at kill_at.
  std::string lost_reason;
  absl::Time kill_at = absl::InfiniteFuture();
  int metrics_port = -1;
  std::string stdout_partial;  // a line not yet ended
  int log_fd = -1;             // the worker's log, for copies of its stdout lines
};

class Runner {
 public:
  Runner(const LocalOptions& o, const LocalEnv& env) : o_(o), env_(env) {}
  ~Runner() {
    StopEverything();
    for (Child& c : children_) {
      if (c.log_fd >= 0) close(c.log_fd);
    }
  }

  absl::Status Run();

 private:
  void Print(const std::string& line) {
    std::fprintf(env_.out, "%s\n", line.c_str());
    std::fflush(env_.out);
  }
  absl::StatusOr<Child*> Spawn(const std::string& name, std::vector<std::string> argv,
                               bool is_worker, std::vector<std::string> env = {});
  // With --nodes: the namespace, addresses and links (before any child).
  absl::Status StartNetwork();
  // With --nodes: one line per node link with the bytes its class sent.
  void PrintLinkBytes();
  // Waits for `c` to write its port file; fails if it exits first.
  absl::StatusOr<int> WaitForPortFile(Child& c, const std::string& path);
  // Blocks briefly for a metrics line in `c`'s log.
  void WaitForMetricsLine(Child& c);
  absl::Status Failure(const Child& c, const std::string& what);
  // A coordinator or data server exited mid-run: start it again on `port`
  // (the coordinator resumes from its state directory), or fail when
  // --max_restarts are used up.
  absl::Status RestartServer(Child& c, int port, const std::string& port_file);
  // Kills every worker the coordinator has expelled (a hung process would
  // otherwise keep the run from ever ending) and says why on the console.
  void KillLostWorkers();
  // Sends SIGKILL to expelled workers whose grace (see KillLostWorkers) is over.
  void KillExpelledWorkers();
  void PumpStdout(int timeout_ms);
  void DrainLines(Child& c, bool eof);
  void StopEverything();
  void SaveTrace();  // --trace: collect and merge RUN_DIR/trace.json
  // Scrapes the services still running into RUN_DIR/metrics/ (the workers
  // wrote theirs as they exited); a failed scrape is only a line of output.
  void SaveServiceMetrics();

  // Run's steps, in order.
  absl::Status PrepareRunDirectory();  // run_dir_ (a fresh /tmp one by default)
  absl::Status SetUpSecurity();        // the job token; with --tls, a CA and certificates
  absl::Status SetUpHosts();           // service_host_; with --nodes, the bind-source library
  void PrintHeader();
  absl::Status StartServices(const DatasetFiles& data);  // coordinator and data server
  absl::Status StartShardServers();                      // --shard_servers
  void PrintServiceMetrics();
  // Worker i's command line and environment (also for add-worker slots).
  void WorkerCommand(const DatasetFiles& data, const std::string& worker_bin, int i,
                     std::vector<std::string>* argv, std::vector<std::string>* env) const;
  absl::Status StartWorkers(const DatasetFiles& data, const std::string& worker_bin);
  // Supervision until every worker has exited (OK) or the run must stop (the
  // error: a failure, the restarts used up, an interrupt).
  absl::Status Supervise();
  absl::Status RestartDeadServers();
  // After every worker exited: failures, metrics, the summary, the result.
  absl::Status FinishRun(absl::Time started);
  void PrintSummary(absl::Time started, int finished);
  int max_workers() const { return o_.max_workers == 0 ? o_.workers : o_.max_workers; }

  const LocalOptions& o_;
  const LocalEnv& env_;
  std::string run_dir_;
  std::string coordinator_address_;
  std::string service_host_;       // where the coordinator and data server listen
  std::string bind_source_library_;  // LD_PRELOAD for simulated nodes' workers
  // "OPENBLAS_CORETYPE=..." for every child, or "" (kernels::OpenblasCoretypeForChildren).
  const std::string blas_coretype_ = kernels::OpenblasCoretypeForChildren(
      getenv("OPENBLAS_CORETYPE"), kernels::DetectCpuFeatures(), kernels::OpenblasCoreName());
  // Declared before children_: destroyed after them, i.e. after every child
  // has been stopped (the destructor returns this thread to its namespace).
  std::unique_ptr<SimulatedNetwork> network_;
  std::vector<Child> children_;  // coordinator, dataserver, workers (reserved: stable)
  std::unique_ptr<JobWatch> watch_;  // the coordinator's lost workers
  std::string token_;       // this run's job token (common/rpc/auth.h)
  std::string token_file_;  // <run_dir>/token, mode 0600
  // --token_file and, with --tls, the --tls_* flags every child gets.
  std::vector<std::string> security_args_;
  std::string status_tls_args_;  // what `tandem status` needs to reach a --tls run
  // This start of the job (--incarnation of every worker): after the whole
  // job was interrupted, the coordinator tells the new workers from live
  // duplicates of the stored generation by it.
  const std::string incarnation_ =
      absl::StrCat(getpid(), "-", absl::ToUnixMillis(absl::Now()));
  std::string last_accuracy_;  // rank 0's latest accuracy line, for <run_dir>/result
  int restarts_used_ = 0;
  // The services (children_ owns them) and where they listen.
  Child* coordinator_ = nullptr;
  Child* dataserver_ = nullptr;
  std::vector<Child*> servers_;  // coordinator, data server, then shard servers
  int coordinator_port_ = 0;
  int data_port_ = 0;
  std::string coord_port_file_, data_port_file_;
  std::string data_address_;
  std::vector<std::string> shard_addresses_;
  std::vector<int> shard_ports_;  // to restart one on its port
};

absl::Status Runner::RestartServer(Child& c, int port, const std::string& port_file) {
  const std::string how = c.process->DescribeExit();
  if (restarts_used_ >= o_.max_restarts) {
    return Failure(c, absl::StrCat("exited while workers were running; not restarted: ",
                                   o_.max_restarts == 0
                                       ? std::string("--max_restarts is 0")
                                       : absl::StrCat("all ", o_.max_restarts,
                                                      " restart(s) of --max_restarts are used up")));
  }
  ++restarts_used_;
  Print(absl::StrCat("tandem local: ", c.process->name(), " (pid ", c.process->pid(), ") ", how,
                     "; restarting it on port ", port, " (restart ", restarts_used_, " of ",
                     o_.max_restarts, ")"));
  SubprocessOptions so = c.spawn;
  for (std::string& a : so.argv) {
    if (absl::StartsWith(a, "--port=")) a = absl::StrCat("--port=", port);
  }
  std::remove(port_file.c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(so));
  c.process = std::move(p);
  c.spawn = so;
  {
    std::ofstream pid(absl::StrCat(run_dir_, "/", so.name, ".pid"));
    pid << c.process->pid() << "\n";
  }
  ASSIGN_OR_RETURN(int bound, WaitForPortFile(c, port_file));
  if (bound != port) {
    return Failure(c, absl::StrCat("came back on port ", bound, ", not ", port));
  }
  Print(absl::StrCat("tandem local: ", so.name, " is back (pid ", c.process->pid(), ")"));
  return absl::OkStatus();
}

void Runner::KillLostWorkers() {
  if (watch_ == nullptr) return;
  for (const v1::LostWorker& lost : watch_->NewlyLost()) {
    bool child = false;
    for (const Child& c : children_) child = child || (c.is_worker && c.process->name() == lost.worker_id());
    if (!child) {
      // A worker `tandem add-worker` started: not ours to reap, but a hung
      // one must not keep the run (and its add-worker) waiting forever.
      const std::string pid_file = absl::StrCat(run_dir_, "/", lost.worker_id(), ".pid");
      const std::string claim = absl::StrCat(run_dir_, "/", lost.worker_id(), ".claim");
      int pid = -1;
      std::ifstream in(pid_file);
      struct stat st;
      if (stat(claim.c_str(), &st) == 0 && (in >> pid) && pid > 0 && kill(pid, 0) == 0) {
        Print(absl::StrCat("tandem local: the coordinator expelled ", lost.worker_id(),
                           " (rank ", lost.rank(), " of generation ", lost.generation(), "): ",
                           lost.reason(), "; killing pid ", pid));
        kill(pid, SIGKILL);
      }
      continue;
    }
    for (Child& c : children_) {
      if (!c.is_worker || c.process->name() != lost.worker_id() || c.process->Poll()) continue;
      if (!c.lost_reason.empty()) continue;
      c.lost_reason = lost.reason();
      // The survivors hear of it at their next heartbeat and abort their
      // collectives with the coordinator's reason; killing the process
      // before that would fail them with a bare "connection reset" instead.
      c.kill_at = absl::Now() + 3 * absl::Milliseconds(o_.heartbeat_ms);
      Print(absl::StrCat("tandem local: the coordinator expelled ", lost.worker_id(), " (rank ",
                         lost.rank(), " of generation ", lost.generation(), "): ", lost.reason(),
                         "; killing pid ", c.process->pid()));
    }
  }
}

void Runner::KillExpelledWorkers() {
  const absl::Time now = absl::Now();
  for (Child& c : children_) {
    if (!c.is_worker || now < c.kill_at) continue;
    c.kill_at = absl::InfiniteFuture();
    // SIGKILL: it also ends a stopped (SIGSTOP) or hung process.
    c.process->Signal(SIGKILL);
  }
}

absl::StatusOr<Child*> Runner::Spawn(const std::string& name, std::vector<std::string> argv,
                                     bool is_worker, std::vector<std::string> env) {
  SubprocessOptions so;
  so.name = name;
  so.argv = std::move(argv);
  // Every child talks gRPC: the job's token (and TLS files) go to each.
  so.argv.insert(so.argv.end(), security_args_.begin(), security_args_.end());
  if (o_.trace && name != "coordinator") {
    for (std::string& a : TraceChildArgs(run_dir_, name, o_.trace_steps)) so.argv.push_back(a);
  }
  so.log_path = absl::StrCat(run_dir_, "/", name, ".log");
  // A resumed run directory: the previous run's log is kept beside (one
  // back), so what this run reads from the log (metrics port, last lines)
  // is its own.
  std::rename(so.log_path.c_str(), (so.log_path + ".prev").c_str());
  so.pipe_stdout = is_worker;
  so.env = std::move(env);
  // N workers share the cores: one BLAS thread each unless the user says.
  if (getenv("OPENBLAS_NUM_THREADS") == nullptr) so.env.push_back("OPENBLAS_NUM_THREADS=1");
  // A fallback kernel set OpenBLAS picked for this CPU is replaced for the
  // children (never a value the user set).
  if (!blas_coretype_.empty()) so.env.push_back(blas_coretype_);
  {
    std::ofstream cmd(absl::StrCat(run_dir_, "/", name, ".cmd"));
    for (const std::string& e : so.env) cmd << e << " ";
    cmd << absl::StrJoin(so.argv, " ") << "\n";
  }
  Child c;
  c.spawn = so;
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(std::move(so)));
  c.is_worker = is_worker;
  if (is_worker) {
    c.log_fd = open(p->log_path().c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  }
  {
    std::ofstream pid(absl::StrCat(run_dir_, "/", name, ".pid"));
    pid << p->pid() << "\n";
  }
  c.process = std::move(p);
  children_.push_back(std::move(c));
  return &children_.back();
}

absl::StatusOr<int> Runner::WaitForPortFile(Child& c, const std::string& path) {
  const absl::Time deadline = absl::Now() + o_.start_timeout;
  while (true) {
    std::string text = Trim(ReadAll(path));
    int port = 0;
    if (!text.empty() && absl::SimpleAtoi(text, &port) && port > 0) return port;
    if (c.process->Poll()) return Failure(c, "exited during start-up");
    if (env_.stop_requested()) return absl::CancelledError("interrupted during start-up");
    if (absl::Now() > deadline) {
      return Failure(c, absl::StrCat("did not report its port within ",
                                     absl::FormatDuration(o_.start_timeout)));
    }
    c.process->WaitFor(absl::Milliseconds(20));
  }
}

void Runner::WaitForMetricsLine(Child& c) {
  // Every child logs its metrics port once it serves /metrics (the servers
  // right after their port file, workers before joining).
  // A child that already exited may still have logged it: read once more.
  // 20 s: a worker on a loaded machine (2 cores, many processes) has taken
  // 3-4 s to get there; one that exits stops the wait at once.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (c.metrics_port < 0) {
    const bool exited = c.process->Poll();
    c.metrics_port = ParseMetricsPort(ReadAll(c.process->log_path()));
    if (c.metrics_port >= 0 || exited || absl::Now() >= deadline) break;
    c.process->WaitFor(absl::Milliseconds(20));
  }
}

absl::Status Runner::Failure(const Child& c, const std::string& what) {
  const Subprocess& p = *c.process;
  return absl::AbortedError(absl::StrCat(p.name(), " (pid ", p.pid(), ") ", what,
                                         p.exited() ? absl::StrCat(" (", p.DescribeExit(), ")")
                                                    : std::string(),
                                         "; last lines of ", p.log_path(), ":\n",
                                         TailOfFile(p.log_path(), kTailLines)));
}

void Runner::DrainLines(Child& c, bool eof) {
  size_t start = 0;
  size_t nl;
  while ((nl = c.stdout_partial.find('\n', start)) != std::string::npos) {
    const std::string line = c.stdout_partial.substr(start, nl - start);
    Print(line);
    if (absl::StrContains(line, " accuracy ")) last_accuracy_ = line;
    if (c.log_fd >= 0) {
      const std::string copy = line + "\n";
      ssize_t ignored = write(c.log_fd, copy.data(), copy.size());
      (void)ignored;
    }
    start = nl + 1;
  }
  c.stdout_partial.erase(0, start);
  if (eof && !c.stdout_partial.empty()) {
    c.stdout_partial.push_back('\n');
    DrainLines(c, false);
  }
}

void Runner::PumpStdout(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  for (Child& c : children_) {
    if (c.process->stdout_fd() < 0) continue;
    fds.push_back({c.process->stdout_fd(), POLLIN, 0});
    owners.push_back(&c);
  }
  if (fds.empty()) {
    // Nothing to read: wait on the first live worker's exit instead.
    for (Child& c : children_) {
      if (c.is_worker && !c.process->exited()) {
        c.process->WaitFor(absl::Milliseconds(timeout_ms));
        return;
      }
    }
    poll(nullptr, 0, timeout_ms);  // only added workers left: a poll interval
    return;
  }
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // timeout or EINTR
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Child& c = *owners[i];
    char buf[4096];
    while (true) {
      const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        c.stdout_partial.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        DrainLines(c, false);
        break;
      }
      DrainLines(c, true);  // EOF or error: the worker closed its stdout
      c.process->CloseStdout();
      break;
    }
  }
}

absl::Status Runner::StartNetwork() {
  SimulatedNetworkOptions n;
  n.nodes = o_.nodes + o_.shard_servers;  // each shard server is a node of its own
  if (!o_.link.empty()) {
    ASSIGN_OR_RETURN(n.link_bits_per_second, ParseLinkRate(o_.link));
  }
  n.link_delay_ms = o_.link_delay_ms;
  n.log_path = run_dir_ + "/network.log";
  ASSIGN_OR_RETURN(network_, SimulatedNetwork::Create(n));
  Print(absl::StrCat("network: ", network_->Describe()));
  return absl::OkStatus();
}

void Runner::PrintLinkBytes() {
  if (network_ == nullptr) return;
  auto sent = network_->NodeLinkBytes();
  if (!sent.ok()) {
    Print(absl::StrCat("links: cannot read the tc counters: ", sent.status().message()));
    return;
  }
  int64_t total = 0;
  std::vector<std::string> parts;
  for (size_t i = 0; i < sent->size(); ++i) {
    total += (*sent)[i];
    const int n = static_cast<int>(i);  // nodes first, then one per shard server
    parts.push_back(n < o_.nodes ? absl::StrCat("node-", n + 1, " ", (*sent)[i])
                                 : absl::StrCat("shard-", n - o_.nodes, " ", (*sent)[i]));
  }
  // One line, parsed by tools/bench/strategies.sh: bytes that left each
  // node for another node (tc class counters, IP headers included); the
  // total also in MiB for a reader.
  Print(absl::StrCat("links: bytes sent to other nodes: ", absl::StrJoin(parts, ", "),
                     "; total ", total,
                     absl::StrFormat(" (%.1f MiB)", static_cast<double>(total) / (1 << 20))));
}

void Runner::SaveServiceMetrics() {
  for (Child& c : children_) {
    if (c.is_worker || c.metrics_port <= 0 || c.process->Poll()) continue;
    auto text = ScrapeMetrics(absl::StrCat(service_host_, ":", c.metrics_port), absl::Seconds(2));
    absl::Status s = text.status();
    if (s.ok()) {
      s = WriteFileAtomically(absl::StrCat(run_dir_, "/metrics/", c.process->name(), ".prom"), *text);
    }
    if (!s.ok()) Print(absl::StrCat("tandem local: ", c.process->name(), "'s metrics not kept: ", s.message()));
  }
}

void Runner::SaveTrace() {
  if (!o_.trace || run_dir_.empty()) return;
  // Before the services stop: they write theirs when asked (SIGUSR1).
  auto trace = CollectRunTrace(run_dir_, absl::Seconds(10));
  Print(trace.ok() ? FormatTraceCollection(*trace)
                   : absl::StrCat("tandem local: the trace was not merged: ",
                                  trace.status().message()));
}

void Runner::StopEverything() {
  // Workers `tandem add-worker` started are not children: SIGTERM them
  // first (their add-worker reaps them), so none outlives the services.
  if (!run_dir_.empty() && o_.max_workers > o_.workers) {
    for (int pid : RunningAddedWorkers(run_dir_, o_.workers, o_.max_workers)) kill(pid, SIGTERM);
  }
  std::vector<Subprocess*> all;
  // Workers first, then the servers they talk to, all within one grace.
  for (int pass = 0; pass < 2; ++pass) {
    for (Child& c : children_) {
      if (c.is_worker == (pass == 0)) all.push_back(c.process.get());
    }
  }
  StopAll(all, o_.grace);
}

absl::Status Runner::Run() {
  const absl::Time started = absl::Now();
  RETURN_IF_ERROR(ValidateLocalOptions(o_));
  ASSIGN_OR_RETURN(const DatasetFiles data, ResolveDataset(o_));
  ASSIGN_OR_RETURN(const std::string worker_bin,
                   FindServiceBinary("worker", o_.bin_dir, env_.self_exe));
  RETURN_IF_ERROR(PrepareRunDirectory());
  RETURN_IF_ERROR(SetUpSecurity());
  RETURN_IF_ERROR(SetUpHosts());
  // Restarts replace a child's process in place (RestartServer).
  children_.reserve(2 + o_.shard_servers + o_.workers);
  PrintHeader();
  if (o_.nodes > 0) RETURN_IF_ERROR(StartNetwork());
  RETURN_IF_ERROR(StartServices(data));
  RETURN_IF_ERROR(StartShardServers());
  watch_ = JobWatch::Create(coordinator_address_, o_.job_id, token_);
  // A resumed run's coordinator holds the previous run's generation; its
  // members' expulsions are not this run's workers' (they would be killed).
  if (!watch_->IgnoreEarlierGenerations(absl::Seconds(10))) {
    Print("tandem local: warning: the coordinator did not answer its first status call; a "
          "worker of the previous run it expels may be taken for this run's");
  }
  PrintServiceMetrics();
  RETURN_IF_ERROR(StartWorkers(data, worker_bin));
  absl::Status supervised = Supervise();
  if (!supervised.ok()) {
    SaveTrace();  // a failed or interrupted run's timeline is the one to look at
    StopEverything();
    return supervised;
  }
  return FinishRun(started);
}

absl::Status Runner::PrepareRunDirectory() {
  if (o_.run_dir.empty()) {
    std::string tmpl = "/tmp/tandem-local-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a run directory under /tmp: ",
                                              std::strerror(errno), "; pass --run_dir"));
    }
    run_dir_ = tmpl;
  } else {
    run_dir_ = o_.run_dir;
    RETURN_IF_ERROR(MakeDirectories(run_dir_));
  }
  // Each process's last metrics land here for `tandem doctor --run_dir`.
  return MakeDirectories(run_dir_ + "/metrics");
}

absl::Status Runner::SetUpSecurity() {
  // One token per run: every process gets the file, every RPC carries it,
  // and no process of another job (or none at all) can join this one.
  token_ = NewAuthToken();
  token_file_ = run_dir_ + "/token";
  {
    const int fd = open(token_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const bool ok = fd >= 0 && fchmod(fd, 0600) == 0 &&
                    write(fd, token_.data(), token_.size()) == static_cast<ssize_t>(token_.size());
    if (fd >= 0) close(fd);
    if (!ok) {
      return absl::PermissionDeniedError(absl::StrCat("cannot write the job token to ",
                                                      token_file_, ": ", std::strerror(errno)));
    }
  }
  security_args_ = {"--token_file=" + token_file_};
  if (!o_.tls) return absl::OkStatus();
  // A CA of the run's own: every process presents the one node
  // certificate and requires a peer's (mutual TLS).
  ASSIGN_OR_RETURN(JobCertificates certs, MakeJobCertificates(run_dir_ + "/tls", {}));
  TlsOptions tls;
  tls.cert_file = certs.cert_file;
  tls.key_file = certs.key_file;
  tls.ca_file = certs.ca_file;
  tls.mutual = true;
  tls.server_name = certs.server_name;
  ASSIGN_OR_RETURN(TlsConfig config, LoadTls(tls));
  status_tls_args_ = absl::StrCat(" --tls_ca ", tls.ca_file, " --tls_cert ", tls.cert_file,
                                  " --tls_key ", tls.key_file, " --tls_server_name ",
                                  tls.server_name);
  SetDefaultTls(config);  // this process's own channels (the job watch)
  for (const std::string& a :
       {"--tls_cert=" + tls.cert_file, "--tls_key=" + tls.key_file, "--tls_ca=" + tls.ca_file,
        std::string("--tls_mutual"), "--tls_server_name=" + tls.server_name}) {
    security_args_.push_back(a);
  }
  return absl::OkStatus();
}

absl::Status Runner::SetUpHosts() {
  service_host_ = o_.host;
  if (o_.nodes <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string lib, FindBindSourceLibrary(o_.bin_dir, env_.self_exe));
  char resolved[PATH_MAX];
  bind_source_library_ = realpath(lib.c_str(), resolved) != nullptr ? resolved : lib;
  service_host_ = SimulatedNetwork::ServiceAddress();
  return absl::OkStatus();
}

void Runner::PrintHeader() {
  Print(JobHeader(o_));
  Print(absl::StrCat("run directory: ", run_dir_, " (one log per process)"));
  const std::string core = kernels::OpenblasCoreName();
  Print(absl::StrCat("kernels: OpenBLAS core ", core.empty() ? "unknown" : core,
                     blas_coretype_.empty() ? "" : absl::StrCat("; children run with ", blas_coretype_),
                     getenv("OPENBLAS_CORETYPE") != nullptr ? " (OPENBLAS_CORETYPE set by you)" : ""));
}

absl::Status Runner::StartServices(const DatasetFiles& data) {
  ASSIGN_OR_RETURN(std::string coordinator_bin,
                   FindServiceBinary("coordinator", o_.bin_dir, env_.self_exe));
  ASSIGN_OR_RETURN(std::string dataserver_bin,
                   FindServiceBinary("dataserver", o_.bin_dir, env_.self_exe));
  ASSIGN_OR_RETURN(const auto batch_range, ResolveBatchRange(o_));
  const int min = o_.min_workers == 0 ? o_.workers : o_.min_workers;
  coord_port_file_ = run_dir_ + "/coordinator.port";
  data_port_file_ = run_dir_ + "/dataserver.port";
  std::remove(coord_port_file_.c_str());
  std::remove(data_port_file_.c_str());
  std::vector<std::string> coordinator_argv = {
      coordinator_bin, "--job_id=" + o_.job_id, "--host=" + service_host_,
      absl::StrCat("--port=", o_.port), "--port_file=" + coord_port_file_, "--metrics_port=0",
      absl::StrCat("--min_workers=", min), absl::StrCat("--max_workers=", max_workers()),
      absl::StrCat("--settle_seconds=", o_.settle_seconds),
      absl::StrCat("--heartbeat_ms=", o_.heartbeat_ms),
      absl::StrCat("--heartbeat_misses=", o_.heartbeat_misses),
      absl::StrCat("--straggler_threshold=", o_.straggler_threshold),
      absl::StrCat("--straggler_window=", o_.straggler_window),
      "--state_dir=" + run_dir_ + "/coordinator-state"};
  if (batch_range.second > 0) {
    coordinator_argv.push_back(
        absl::StrCat("--batch_auto=", batch_range.first, ",", batch_range.second));
  }
  ASSIGN_OR_RETURN(coordinator_, Spawn("coordinator", std::move(coordinator_argv), false));
  ASSIGN_OR_RETURN(
      dataserver_,
      Spawn("dataserver",
            {dataserver_bin,
             "--dataset=" + DataServerDatasets(data),
             "--host=" + service_host_, "--port=0", "--port_file=" + data_port_file_,
             "--metrics_port=0", absl::StrCat("--decode_threads=", o_.decode_threads),
             absl::StrCat("--simulate_slow_data_ms=", o_.simulate_slow_data_ms)},
            false));
  ASSIGN_OR_RETURN(coordinator_port_, WaitForPortFile(*coordinator_, coord_port_file_));
  ASSIGN_OR_RETURN(data_port_, WaitForPortFile(*dataserver_, data_port_file_));
  coordinator_address_ = absl::StrCat(service_host_, ":", coordinator_port_);
  data_address_ = absl::StrCat(service_host_, ":", data_port_);
  // With --nodes the coordinator is only reachable inside the run's namespace.
  const std::string enter =
      network_ == nullptr
          ? std::string()
          : absl::StrCat("nsenter --net=/proc/", coordinator_->process->pid(), "/ns/net ");
  Print(absl::StrCat("coordinator: ", coordinator_address_, "  (", enter,
                     "tandem status --coordinator ", coordinator_address_, " --job_id ",
                     o_.job_id, " --token_file ", token_file_, status_tls_args_, ")"));
  Print(absl::StrCat("data server: ", data_address_));
  servers_ = {coordinator_, dataserver_};
  return absl::OkStatus();
}

absl::Status Runner::StartShardServers() {
  // --sync ps / hybrid: before the workers, which need them.
  if (o_.shard_servers <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string shard_bin,
                   FindServiceBinary("shardserver", o_.bin_dir, env_.self_exe));
  std::vector<std::pair<Child*, std::string>> started;
  for (int s = 0; s < o_.shard_servers; ++s) {
    const std::string host =
        network_ != nullptr ? SimulatedNetwork::NodeAddress(o_.nodes + 1 + s) : o_.host;
    const std::string port_file = absl::StrCat(run_dir_, "/shard-", s, ".port");
    std::remove(port_file.c_str());
    ASSIGN_OR_RETURN(Child * c,
                     Spawn(absl::StrCat("shard-", s),
                           {shard_bin, "--bind=" + host, "--port=0", "--port_file=" + port_file,
                            "--metrics_port=0", absl::StrCat("--server_id=shard-", s),
                            // Reports its ranges and bytes for `tandem status`.
                            "--coordinator=" + coordinator_address_, "--job_id=" + o_.job_id},
                           false));
    servers_.push_back(c);
    started.push_back({c, host});
  }
  for (int s = 0; s < o_.shard_servers; ++s) {
    ASSIGN_OR_RETURN(int port, WaitForPortFile(*started[s].first,
                                               absl::StrCat(run_dir_, "/shard-", s, ".port")));
    shard_addresses_.push_back(absl::StrCat(started[s].second, ":", port));
    shard_ports_.push_back(port);
  }
  Print(absl::StrCat("shard servers: ", absl::StrJoin(shard_addresses_, ",")));
  return absl::OkStatus();
}

void Runner::PrintServiceMetrics() {
  WaitForMetricsLine(*coordinator_);
  WaitForMetricsLine(*dataserver_);
  for (Child* c : {coordinator_, dataserver_}) {
    if (c->metrics_port > 0) {
      Print(absl::StrCat("metrics: ", c->process->name(), " http://", service_host_, ":",
                         c->metrics_port, "/metrics"));
    }
  }
}

void Runner::WorkerCommand(const DatasetFiles& data, const std::string& worker_bin, int i,
                           std::vector<std::string>* argv, std::vector<std::string>* env) const {
  // Workers bind /metrics on port 0 before joining and log the port.
  const std::string name = absl::StrCat("worker-", i);
  *argv = WorkerArgv(o_, data, worker_bin, coordinator_address_, data_address_, i, run_dir_);
  argv->push_back("--metrics_port=0");
  argv->push_back(absl::StrCat("--metrics_file=", run_dir_, "/metrics/", name, ".prom"));
  argv->push_back("--incarnation=" + incarnation_);
  if (!shard_addresses_.empty()) {
    argv->push_back("--shard_servers=" + absl::StrJoin(shard_addresses_, ","));
  }
  env->clear();
  if (network_ != nullptr) {
    // Gloo and gRPC connect without binding: pin the source to the node's
    // address so the node's tc class sees (shapes, counts) what it sends.
    const char* preload = getenv("LD_PRELOAD");
    env->push_back(absl::StrCat("LD_PRELOAD=", bind_source_library_,
                                preload != nullptr && *preload != '\0'
                                    ? absl::StrCat(":", preload)
                                    : std::string()));
    env->push_back("TANDEM_BIND_SOURCE=" + WorkerHost(o_, i));
  }
}

absl::Status Runner::StartWorkers(const DatasetFiles& data, const std::string& worker_bin) {
  std::vector<Child*> workers;
  for (int i = 0; i < o_.workers; ++i) {
    std::vector<std::string> argv, env;
    WorkerCommand(data, worker_bin, i, &argv, &env);
    ASSIGN_OR_RETURN(Child * w,
                     Spawn(absl::StrCat("worker-", i), std::move(argv), true, std::move(env)));
    workers.push_back(w);
  }
  // Room to grow (--max_workers above --workers): one slot per extra worker
  // for `tandem add-worker --run_dir` (tools/tandem/add_worker.h). Not with
  // --nodes: an added process would be outside the run's network namespace.
  if (network_ == nullptr) {
    for (int i = o_.workers; i < max_workers(); ++i) {
      std::vector<std::string> argv, env;
      WorkerCommand(data, worker_bin, i, &argv, &env);
      if (getenv("OPENBLAS_NUM_THREADS") == nullptr) env.push_back("OPENBLAS_NUM_THREADS=1");
      if (!blas_coretype_.empty()) env.push_back(blas_coretype_);
      // Spawn adds these to the workers it starts; a slot is started by
      // tandem add-worker, so its command line carries them itself.
      argv.insert(argv.end(), security_args_.begin(), security_args_.end());
      if (o_.trace) {
        for (std::string& a : TraceChildArgs(run_dir_, absl::StrCat("worker-", i), o_.trace_steps)) {
          argv.push_back(a);
        }
      }
      RETURN_IF_ERROR(WriteWorkerSlot(run_dir_, i, env, argv));
    }
    if (max_workers() > o_.workers) {
      Print(absl::StrCat("room for ", max_workers() - o_.workers,
                         " more worker(s): tandem add-worker --run_dir ", run_dir_));
    }
  }
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    Child* w = workers[i];
    WaitForMetricsLine(*w);
    if (w->metrics_port > 0) {
      Print(absl::StrCat("metrics: ", w->process->name(), " http://", WorkerHost(o_, i), ":",
                         w->metrics_port, "/metrics"));
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::RestartDeadServers() {
  // A dead coordinator or data server is restarted on its port (the
  // workers ride out the gap); a dead shard server too under --keep_going
  // (empty: the workers' steps fail, they re-join, and rank 0 hands every
  // server the last checkpoint's parameters and optimizer state). All
  // count against --max_restarts.
  for (size_t i = 0; i < servers_.size(); ++i) {
    Child* server = servers_[i];
    if (!server->process->Poll()) continue;
    if (server == coordinator_) {
      RETURN_IF_ERROR(RestartServer(*server, coordinator_port_, coord_port_file_));
    } else if (server == dataserver_) {
      RETURN_IF_ERROR(RestartServer(*server, data_port_, data_port_file_));
    } else if (!o_.keep_going) {
      return Failure(*server, "exited while workers were running (--keep_going restarts it)");
    } else {
      const int shard = static_cast<int>(i) - 2;
      RETURN_IF_ERROR(RestartServer(*server, shard_ports_[shard],
                                    absl::StrCat(run_dir_, "/shard-", shard, ".port")));
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::Supervise() {
  // Until every worker has exited, something fails, or a signal. The
  // coordinator's verdicts are read a few times per heartbeat period.
  const absl::Duration watch_every =
      std::max(absl::Milliseconds(50), absl::Milliseconds(o_.heartbeat_ms) / 4);
  absl::Time next_watch = absl::Now();
  while (true) {
    PumpStdout(100);
    if (env_.stop_requested()) {
      return absl::CancelledError(absl::StrCat("interrupted; stopped every process (logs in ",
                                               run_dir_, ")"));
    }
    RETURN_IF_ERROR(RestartDeadServers());
    if (absl::Now() >= next_watch) {
      KillLostWorkers();
      // The coordinator's straggler verdicts, as they change (its log has
      // them too).
      if (watch_ != nullptr) {
        for (const std::string& line : watch_->StragglerChanges()) Print(line);
      }
      next_watch = absl::Now() + watch_every;
    }
    KillExpelledWorkers();
    bool running = false;
    const Child* first_failed = nullptr;  // exited non-zero or died
    for (Child& c : children_) {
      if (!c.is_worker) continue;
      const bool exited = c.process->Poll();
      // Keep reading a worker's stdout until EOF, even after it exits.
      if (!exited || c.process->stdout_fd() >= 0) running = true;
      if (exited && !c.process->succeeded() && first_failed == nullptr) first_failed = &c;
    }
    if (first_failed != nullptr && !o_.keep_going) {
      return Failure(*first_failed,
                     first_failed->lost_reason.empty()
                         ? std::string("failed")
                         : absl::StrCat("was lost: ", first_failed->lost_reason,
                                        "; tandem local killed it (the coordinator had "
                                        "expelled it; --keep_going lets the others go on)"));
    }
    // Workers added with `tandem add-worker` are not children; the services
    // stay up until they have left too.
    if (!running && max_workers() > o_.workers &&
        !RunningAddedWorkers(run_dir_, o_.workers, max_workers()).empty()) {
      running = true;
    }
    if (!running) return absl::OkStatus();
  }
}

absl::Status Runner::FinishRun(absl::Time started) {
  // Every worker has exited. Only one that did not finish cleanly gets a
  // line of its own (with its last log line); a clean run ends with the
  // workers' own final lines and one summary.
  int finished = 0;
  const Child* first_failed = nullptr;  // exited non-zero or died
  const Child* first_error = nullptr;   // exited with a non-zero status
  for (Child& c : children_) {
    if (!c.is_worker) continue;
    if (c.process->succeeded()) {
      ++finished;
      continue;
    }
    if (first_failed == nullptr) first_failed = &c;
    if (c.process->term_signal() == 0 && first_error == nullptr) first_error = &c;
    std::string last = LastLine(c.process->log_path());
    if (last.size() > 240) last = last.substr(0, 240) + "...";
    Print(absl::StrCat(c.process->name(), " ",
                       c.lost_reason.empty()
                           ? c.process->DescribeExit()
                           : absl::StrCat("was lost (", c.lost_reason, ") and killed"),
                       last.empty() ? "" : ": ", last));
  }
  SaveServiceMetrics();
  SaveTrace();
  StopEverything();
  PrintLinkBytes();
  // keep_going: workers killed by a signal were lost and the job went on
  // without them; the run fails only if a worker reported an error or
  // nobody finished.
  if (first_error != nullptr) return Failure(*first_error, "failed");
  if (finished == 0) return Failure(*first_failed, "failed");
  PrintSummary(started, finished);
  // What a later `tandem local` on this run directory reports (run_dir.h).
  if (absl::Status s = WriteFileAtomically(
          ResultPath(run_dir_),
          (last_accuracy_.empty()
               ? std::string("no test accuracy was measured (it is measured at the end of each "
                             "epoch and of the run)")
               : last_accuracy_) +
              "\n");
      !s.ok()) {
    Print(absl::StrCat("tandem local: the result was not kept: ", s.message()));
  }
  if (o_.doctor) {
    DoctorCliOptions d;
    d.run_dir = run_dir_;
    d.link = o_.link;
    auto report = RunDoctor(d);
    Print(report.ok() ? *report : absl::StrCat("tandem doctor: ", report.status().message()));
  }
  return absl::OkStatus();
}

void Runner::PrintSummary(absl::Time started, int finished) {
  // Workers `tandem add-worker` started count as the job's too; their
  // add-worker writes how each ended a moment after it exits.
  AddedWorkers added = CountAddedWorkers(run_dir_, o_.workers, max_workers());
  for (const absl::Time until = absl::Now() + absl::Seconds(2);
       added.exited < added.started && absl::Now() < until;
       added = CountAddedWorkers(run_dir_, o_.workers, max_workers())) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const int all = o_.workers + added.started;
  finished += added.clean;
  Print(absl::StrCat("tandem local: job finished in ",
                     absl::StrFormat("%.1f", absl::ToDoubleSeconds(absl::Now() - started)),
                     " s; ", finished, " of ", all, " workers exited cleanly",
                     added.started > 0
                         ? absl::StrCat(" (", added.started, " added with tandem add-worker)")
                         : "",
                     finished < all ? absl::StrCat(" (", all - finished, " lost)") : "",
                     "; logs in ", run_dir_));
}

}  // namespace

std::string JobHeader(const LocalOptions& o) {
  const auto range = ResolveBatchRange(o);
  const bool batch_auto = range.ok() && range->second > 0;
  return absl::StrCat(
      "tandem local: ", o.workers, " workers",
      o.nodes > 0 ? absl::StrCat(" (", o.nodes, " nodes x ", o.workers_per_node, ")")
                  : std::string(),
      ", model ", o.model, ", dataset ", o.dataset, ", ",
      o.max_steps > 0 ? absl::StrCat(o.max_steps, " steps (--max_steps)")
                      : absl::StrCat(o.epochs, " epoch(s)"),
      ", batch ",
      batch_auto ? absl::StrCat("auto ", range->first, "..", range->second, " global")
                 : absl::StrCat(o.batch_size, " per worker"),
      ", ", o.optimizer, " lr ", o.lr, ", precision ", o.precision.empty() ? "fp32" : o.precision,
      ", sync ", o.sync, o.sync_opt.empty() ? "" : " " + o.sync_opt);
}

int ParseMetricsPort(const std::string& text) {
  for (const char* key : {"metrics_port=", "metrics port ", "metrics port=", "metrics on port "}) {
    size_t at = text.find(key);
    while (at != std::string::npos) {
      size_t i = at + std::strlen(key);
      size_t j = i;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      int port = 0;
      if (j > i && absl::SimpleAtoi(text.substr(i, j - i), &port) && port > 0) return port;
      at = text.find(key, at + 1);
    }
  }
  return -1;
}

std::string WorkerHost(const LocalOptions& o, int index) {
  if (o.nodes <= 0 || o.workers_per_node <= 0) return o.host;
  return SimulatedNetwork::NodeAddress(index / o.workers_per_node + 1);
}

std::vector<std::string> WorkerArgv(const LocalOptions& o, const DatasetFiles& data,
                                    const std::string& binary, const std::string& coordinator,
                                    const std::string& data_server, int index,
                                    const std::string& run_dir) {
  std::vector<std::string> a = {
      binary,
      "--coordinator=" + coordinator,
      "--data_servers=" + data_server,
      "--job_id=" + o.job_id,
      absl::StrCat("--worker_id=worker-", index),
      "--host=" + WorkerHost(o, index),
      "--model=" + o.model,
      "--dataset=" + data.train_name,
      "--eval_dataset=" + (o.evaluate ? data.eval_name : std::string()),
      absl::StrCat("--epochs=", o.epochs),
      absl::StrCat("--batch_size=", o.batch_size),
      absl::StrCat("--lr=", o.lr),
      "--optimizer=" + o.optimizer,
      absl::StrCat("--seed=", o.seed),
      "--checkpoint_dir=" + run_dir + "/checkpoints",
      absl::StrCat("--log_every=", o.log_every),
      "--backend=" + o.backend,
  };
  if (o.nodes > 0 && o.workers_per_node > 0) {
    a.push_back(absl::StrCat("--node_id=node-", index / o.workers_per_node + 1));
  }
  // NCCL refuses two ranks on one GPU: worker i drives device i.
  if (o.backend == "cuda") a.push_back(absl::StrCat("--cuda_device=", index));
  if (o.accumulation > 0) a.push_back(absl::StrCat("--accumulation=", o.accumulation));
  if (!o.lr_scaling.empty()) a.push_back("--lr_scaling=" + o.lr_scaling);
  if (!o.schedule.empty()) a.push_back("--schedule=" + o.schedule);
  if (o.warmup_steps >= 0) a.push_back(absl::StrCat("--warmup_steps=", o.warmup_steps));
  if (o.momentum >= 0) a.push_back(absl::StrCat("--momentum=", o.momentum));
  if (o.weight_decay >= 0) a.push_back(absl::StrCat("--weight_decay=", o.weight_decay));
  if (o.bucket_cap_mb > 0) a.push_back(absl::StrCat("--bucket_cap_mb=", o.bucket_cap_mb));
  if (!o.precision.empty()) a.push_back("--precision=" + o.precision);
  // The worker's own defaults are allreduce, no options, no profile: only a
  // choice that differs is spelled out.
  if (!o.sync.empty() && o.sync != LocalOptions().sync) a.push_back("--sync=" + o.sync);
  if (!o.sync_opt.empty()) a.push_back("--sync_opt=" + o.sync_opt);
  if (o.profile) a.push_back("--profile");
  if (!o.transport.empty()) a.push_back("--transport=" + o.transport);
  if (o.checkpoint_every >= 0) {
    a.push_back(absl::StrCat("--checkpoint_every=", o.checkpoint_every));
  }
  if (o.max_steps > 0) a.push_back(absl::StrCat("--max_steps=", o.max_steps));
  if (auto range = ResolveBatchRange(o); range.ok() && range->second > 0) {
    a.push_back(absl::StrCat("--batch=auto:", range->first, ",", range->second));
  }
  if (!o.batch_schedule.empty()) a.push_back("--batch_schedule=" + o.batch_schedule);
  for (const std::string& extra : o.worker_args) a.push_back(extra);
  return a;
}

absl::Status RunLocal(const LocalOptions& options, const LocalEnv& env) {
  Runner runner(options, env);
  return runner.Run();
}

}  // namespace cli
}  // namespace tandem
