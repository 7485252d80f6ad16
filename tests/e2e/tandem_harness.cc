#include "tests/e2e/tandem_harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/tandem/process.h"
#include "tools/tandem/run_dir.h"

namespace tandem {
namespace e2e {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

namespace {
int ReadPidFile(const std::string& path) {
  std::string text = ReadFile(path);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  int pid = -1;
  return absl::SimpleAtoi(text, &pid) ? pid : -1;
}
}  // namespace

int ReadPid(const std::string& run_dir, const std::string& name) {
  return ReadPidFile(run_dir + "/" + name + ".pid");
}

int ReadLockHolder(const std::string& run_dir) { return ReadPidFile(run_dir + "/tandem.lock"); }

namespace {

std::string RunfilesRoot() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/tandem";
}

}  // namespace

int64_t CommittedStep(const std::string& run_dir) {
  auto prior = cli::InspectRunDir(run_dir, "local");
  return prior.ok() ? prior->step : 0;
}

std::function<void(const std::string&)> InterruptOnceCommitted(const std::string& run_dir,
                                                               bool* interrupted) {
  return [run_dir, interrupted](const std::string& line) {
    if (*interrupted || !absl::StartsWith(line, "step ") || CommittedStep(run_dir) <= 0) return;
    const int pid = ReadLockHolder(run_dir);  // the lock file's holder
    *interrupted = pid > 0 && kill(pid, SIGINT) == 0;
  };
}

absl::StatusOr<std::unique_ptr<cli::Subprocess>> StartAddWorker(const std::string& run_dir,
                                                                 const std::string& log_path) {
  cli::SubprocessOptions o;
  o.name = "add-worker";
  o.argv = {RunfilesRoot() + "/tools/tandem/tandem", "add-worker", "--run_dir=" + run_dir};
  o.log_path = log_path;
  return cli::Subprocess::Start(o);
}

TandemRun RunTandem(const std::vector<std::string>& args,
                    const std::function<void(const std::string&)>& on_line) {
  static int count = 0;
  const std::string root = RunfilesRoot();
  cli::SubprocessOptions o;
  o.name = "tandem";
  o.argv = {root + "/tools/tandem/tandem"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  // --bin_dir is a `tandem local` flag; other commands reject it.
  if (!args.empty() && args.front() == "local") o.argv.push_back("--bin_dir=" + root);
  o.log_path = TmpPath(absl::StrCat("tandem-", count++, ".stderr"));
  o.pipe_stdout = true;
  TandemRun run;
  auto p = cli::Subprocess::Start(o);
  if (!p.ok()) {
    run.stderr_text = std::string(p.status().message());
    return run;
  }
  std::string partial;
  while ((*p)->stdout_fd() >= 0) {
    pollfd fd{(*p)->stdout_fd(), POLLIN, 0};
    if (poll(&fd, 1, -1) < 0 && errno != EINTR) break;
    char buf[4096];
    const ssize_t n = read((*p)->stdout_fd(), buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      (*p)->CloseStdout();
      if (!partial.empty()) partial.push_back('\n');
    } else {
      partial.append(buf, static_cast<size_t>(n));
    }
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      const std::string line = partial.substr(0, nl);
      partial.erase(0, nl + 1);
      run.stdout_text += line + "\n";
      if (on_line) on_line(line);
    }
  }
  (*p)->WaitFor(absl::InfiniteDuration());
  run.exit_code = (*p)->term_signal() != 0 ? 128 + (*p)->term_signal() : (*p)->exit_code();
  run.stderr_text = ReadFile(o.log_path);
  return run;
}

}  // namespace e2e
}  // namespace tandem
