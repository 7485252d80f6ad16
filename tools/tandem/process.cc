#include "tools/tandem/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace tandem {
namespace cli {
namespace {

// Waits until `pid` exits or `timeout` passes, without reaping it. Uses a
// pidfd (Linux 5.3+) so the wait is an event, not a polling loop; falls
// back to short polls where pidfd_open is unavailable.
void WaitForExitEvent(pid_t pid, absl::Duration timeout) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    const int ms = timeout == absl::InfiniteDuration()
                       ? -1
                       : static_cast<int>(std::min<int64_t>(
                             absl::ToInt64Milliseconds(timeout), 1 << 30));
    while (poll(&p, 1, ms) < 0 && errno == EINTR) {
    }
    close(fd);
    return;
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    siginfo_t info{};
    if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) return;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

// The descriptors Start opens before fork; -1 = not open.
struct StartFds {
  int log = -1;
  int out[2] = {-1, -1};  // the child's stdout, when piped
  // exec failures are reported through this close-on-exec pipe: EOF means
  // exec succeeded, an errno value means it did not.
  int status[2] = {-1, -1};

  void Close(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  void CloseAll() {
    for (int* fd : {&log, &out[0], &out[1], &status[0], &status[1]}) Close(fd);
  }
};

absl::Status OpenStartFds(const SubprocessOptions& options, StartFds* fds) {
  fds->log = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fds->log < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open log file ", options.log_path,
                                                    ": ", std::strerror(errno)));
  }
  if ((options.pipe_stdout && pipe2(fds->out, O_CLOEXEC) != 0) ||
      pipe2(fds->status, O_CLOEXEC) != 0) {
    const int err = errno;
    fds->CloseAll();
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

// This process's environment with `overrides` (KEY=VALUE) replacing the
// same keys. Built before fork: after it only async-signal-safe calls.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env = overrides;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('=') + 1);
    bool overridden = false;
    for (const std::string& o : overrides) overridden = overridden || o.rfind(key, 0) == 0;
    if (!overridden) env.push_back(entry);
  }
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the forked child: only async-signal-safe calls from here to exec.
[[noreturn]] void ExecChild(const StartFds& fds, bool pipe_stdout, pid_t parent, char** argv,
                            char** envp) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(127);  // the supervisor already died
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  dup2(pipe_stdout ? fds.out[1] : fds.log, STDOUT_FILENO);
  dup2(fds.log, STDERR_FILENO);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  execve(argv[0], argv, envp);
  const int err = errno;
  ssize_t ignored = write(fds.status[1], &err, sizeof(err));
  (void)ignored;
  _exit(127);
}

// The errno of the child's failed exec, or 0 once exec closed the pipe.
int ReadExecErrno(int status_fd) {
  int child_errno = 0;
  ssize_t n;
  while ((n = read(status_fd, &child_errno, sizeof(child_errno))) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(sizeof(child_errno)) ? child_errno : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(SubprocessOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("Subprocess: empty argv");
  if (access(options.argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot execute ", options.argv[0], " for ",
                                            options.name, ": ", std::strerror(errno),
                                            " (build it, or pass --bin_dir)"));
  }
  StartFds fds;
  if (absl::Status s = OpenStartFds(options, &fds); !s.ok()) return s;
  std::vector<char*> argv = Pointers(options.argv);
  std::vector<std::string> env_strings = ChildEnvironment(options.env);
  std::vector<char*> envp = Pointers(env_strings);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    fds.CloseAll();
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) ExecChild(fds, options.pipe_stdout, parent, argv.data(), envp.data());
  fds.Close(&fds.log);
  fds.Close(&fds.status[1]);
  fds.Close(&fds.out[1]);
  const int child_errno = ReadExecErrno(fds.status[0]);
  fds.Close(&fds.status[0]);
  if (child_errno != 0) {
    waitpid(pid, nullptr, 0);
    fds.Close(&fds.out[0]);
    return absl::InternalError(absl::StrCat("cannot execute ", options.argv[0], " for ",
                                            options.name, ": ", std::strerror(child_errno)));
  }
  auto p = std::unique_ptr<Subprocess>(new Subprocess(std::move(options)));
  p->pid_ = pid;
  if (p->options_.pipe_stdout) {
    fcntl(fds.out[0], F_SETFL, fcntl(fds.out[0], F_GETFL) | O_NONBLOCK);
    p->stdout_fd_ = fds.out[0];
  }
  return p;
}

Subprocess::~Subprocess() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  CloseStdout();
}

void Subprocess::CloseStdout() {
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdout_fd_ = -1;
}

bool Subprocess::Poll() {
  if (exited_) return true;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  exited_ = true;
  if (WIFEXITED(status)) {
    exit_code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    signal_ = WTERMSIG(status);
  }
  return true;
}

bool Subprocess::WaitFor(absl::Duration timeout) {
  if (Poll()) return true;
  WaitForExitEvent(pid_, timeout);
  return Poll();
}

std::string Subprocess::DescribeExit() const {
  if (!exited_) return "running";
  if (signal_ != 0) return absl::StrCat("killed by signal ", signal_, " (", strsignal(signal_), ")");
  return absl::StrCat("exited with status ", exit_code_);
}

void Subprocess::Signal(int sig) {
  if (!Poll()) kill(pid_, sig);
}

void Subprocess::Stop(absl::Duration grace) { StopAll({this}, grace); }

void StopAll(const std::vector<Subprocess*>& processes, absl::Duration grace) {
  for (Subprocess* p : processes) {
    if (p != nullptr) p->Signal(SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  for (Subprocess* p : processes) {
    if (p == nullptr) continue;
    p->WaitFor(std::max(absl::ZeroDuration(), deadline - absl::Now()));
  }
  for (Subprocess* p : processes) {
    if (p == nullptr || p->Poll()) continue;
    p->Signal(SIGKILL);
    p->WaitFor(absl::InfiniteDuration());
  }
}

std::string TailOfFile(const std::string& path, int lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::StrCat("(cannot read ", path, ")");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - (64 << 10));
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  std::vector<std::string> all = absl::StrSplit(text, '\n');
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) absl::StrAppend(&out, all[i], "\n");
  return out;
}

}  // namespace cli
}  // namespace tandem
