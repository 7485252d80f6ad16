#include "tools/tandem/run_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "proto/coordinator.pb.h"

namespace tandem {
namespace cli {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunDirLock>> RunDirLock::Acquire(const std::string& run_dir) {
  RETURN_IF_ERROR(MakeDirectories(run_dir));
  const std::string path = run_dir + "/tandem.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {0};
    const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::InternalError(absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
    }
    int pid = 0;
    const bool known = n > 0 && absl::SimpleAtoi(Trim(std::string(buf, n)), &pid) && pid > 0;
    return absl::AlreadyExistsError(absl::StrCat(
        "run directory ", run_dir, " is in use by another tandem local",
        known ? absl::StrCat(" (pid ", pid, ")") : std::string(),
        "; wait for it to end, stop it",
        known ? absl::StrCat(" (kill -INT ", pid, ")") : std::string(),
        ", or pass another --run_dir"));
  }
  // Ours: the pid is only for the message above (the lock itself is flock).
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<RunDirLock>(new RunDirLock(fd));
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

std::string ResultPath(const std::string& run_dir) { return run_dir + "/result"; }

absl::StatusOr<PriorRun> InspectRunDir(const std::string& run_dir, const std::string& job_id) {
  PriorRun prior;
  prior.run_dir = run_dir;
  const std::string path = run_dir + "/coordinator-state/coordinator_state.pb";
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    if (bytes.status().code() == absl::StatusCode::kNotFound) return prior;
    return bytes.status();
  }
  v1::CoordinatorState state;
  if (!state.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(
        path, " is unreadable: pass another --run_dir to start a new run (or delete ", run_dir,
        ")"));
  }
  if (!job_id.empty() && state.job_id() != job_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "run directory ", run_dir, " holds job '", state.job_id(), "', not '", job_id,
        "': pass --job_id ", state.job_id(), " to resume it, or another --run_dir"));
  }
  prior.kind = state.finished() ? PriorRun::kFinished : PriorRun::kInterrupted;
  prior.step = state.last_checkpoint().step();
  prior.checkpoint = state.last_checkpoint().path();
  prior.epoch = state.last_checkpoint().cursor().epoch();
  prior.samples_in_epoch = state.last_checkpoint().cursor().samples_in_epoch();
  if (prior.kind == PriorRun::kFinished) {
    absl::StatusOr<std::string> result = ReadFileToString(ResultPath(run_dir));
    if (result.ok()) prior.result = Trim(*result);
  }
  return prior;
}

std::string ResumeMessage(const PriorRun& p) {
  if (p.checkpoint.empty()) {
    return absl::StrCat("tandem local: ", p.run_dir,
                        " holds an interrupted run with no committed checkpoint: starting it "
                        "again from step 0 (another --run_dir starts a new run)");
  }
  return absl::StrCat("tandem local: resuming from step ", p.step, " of the interrupted run in ",
                      p.run_dir, " (checkpoint ", p.checkpoint, ", epoch ", p.epoch + 1,
                      ", sample ", p.samples_in_epoch,
                      "); another --run_dir starts a new run");
}

std::string FinishedMessage(const PriorRun& p) {
  return absl::StrCat(
      "tandem local: the run in ", p.run_dir, " has already finished",
      p.step > 0 ? absl::StrCat(" (last checkpoint at step ", p.step, ")") : std::string(), ": ",
      p.result.empty() ? std::string("its final accuracy was not recorded") : p.result,
      ". Nothing to do; to start a new run, pass another --run_dir (or delete ", p.run_dir, ")");
}

}  // namespace cli
}  // namespace tandem
