// Subprocess: one child process started by fork+exec, with its stderr (and,
// unless piped, its stdout) appended to a log file, for supervisors such as
// `tandem local` and for multi-process tests.
//
//   SubprocessOptions o;
//   o.name = "coordinator";
//   o.argv = {"/path/coordinator", "--port=0"};
//   o.log_path = run_dir + "/coordinator.log";
//   ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(o));
//   ...
//   p->Stop(absl::Seconds(5));   // SIGTERM, then SIGKILL after the grace
//
// The child gets an empty signal mask and default SIGINT/SIGTERM handling,
// its own process group (a terminal's Ctrl-C reaches only the supervisor,
// which stops children in order), and PR_SET_PDEATHSIG=SIGTERM so it does
// not outlive a supervisor that is killed outright.
//
// Not thread-safe: one thread owns a Subprocess. Start fails with a Status
// when the binary cannot be executed or the log file cannot be opened. The
// destructor kills (SIGKILL) and reaps a child still running.
#ifndef TANDEM_TOOLS_TANDEM_PROCESS_H_
#define TANDEM_TOOLS_TANDEM_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {
namespace cli {

struct SubprocessOptions {
  std::string name;               // for messages, e.g. "worker-2"
  std::vector<std::string> argv;  // argv[0] is the binary's path
  std::string log_path;           // stderr (and stdout unless piped); appended
  // True: the child's stdout is a pipe the owner reads (stdout_fd()).
  bool pipe_stdout = false;
  // "NAME=value" entries added to (or replacing in) this process's environment.
  std::vector<std::string> env;
};

class Subprocess {
 public:
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(SubprocessOptions options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  const std::string& name() const { return options_.name; }
  const std::string& log_path() const { return options_.log_path; }
  pid_t pid() const { return pid_; }
  // Read end of the stdout pipe (non-blocking), -1 when not piped or closed.
  int stdout_fd() const { return stdout_fd_; }
  void CloseStdout();

  // Reaps the child if it has exited; never blocks. Returns true once exited.
  bool Poll();
  // Waits up to `timeout` for the child to exit; true if it has.
  bool WaitFor(absl::Duration timeout);
  bool exited() const { return exited_; }
  // Valid once exited(): true for exit status 0.
  bool succeeded() const { return exited_ && exit_code_ == 0 && signal_ == 0; }
  int exit_code() const { return exit_code_; }
  int term_signal() const { return signal_; }
  // "exited with status 1", "killed by signal 9 (Killed)" or "running".
  std::string DescribeExit() const;

  // Sends `sig` if the child is still running.
  void Signal(int sig);
  // SIGTERM, wait up to `grace`, then SIGKILL and reap. Idempotent.
  void Stop(absl::Duration grace);

 private:
  explicit Subprocess(SubprocessOptions options) : options_(std::move(options)) {}

  SubprocessOptions options_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  int signal_ = 0;
};

// Stops every process in `processes` together: SIGTERM to all, one shared
// grace period, then SIGKILL to whatever is left. Null entries are skipped.
void StopAll(const std::vector<Subprocess*>& processes, absl::Duration grace);

// The last `lines` lines of the file at `path` (at most 64 KiB read), or a
// note that it could not be read.
std::string TailOfFile(const std::string& path, int lines);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_PROCESS_H_
