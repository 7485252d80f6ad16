#include "tools/tandem/add_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace cli {
namespace {

// Slots are numbered from 1 up to this; tandem local writes few.
constexpr int kMaxSlotIndex = 4096;

std::string SlotPath(const std::string& dir, int i) {
  return absl::StrCat(dir, "/worker-", i, ".slot");
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

int ReadPidFile(const std::string& path) {
  std::ifstream in(path);
  int pid = -1;
  if (!(in >> pid)) return -1;
  return pid;
}

}  // namespace

absl::Status WriteWorkerSlot(const std::string& run_dir, int index,
                             const std::vector<std::string>& env,
                             const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& e : env) {
    if (absl::StrContains(e, '\n')) return absl::InvalidArgumentError("slot: newline in " + e);
    absl::StrAppend(&text, "env ", e, "\n");
  }
  for (const std::string& a : argv) {
    if (absl::StrContains(a, '\n')) return absl::InvalidArgumentError("slot: newline in " + a);
    absl::StrAppend(&text, "arg ", a, "\n");
  }
  return WriteFileAtomically(SlotPath(run_dir, index), text);
}

absl::StatusOr<WorkerSlot> ClaimWorkerSlot(const std::string& run_dir) {
  struct stat st;
  if (stat(run_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(
        "--run_dir ", run_dir, " is not a directory: pass the run directory tandem local printed"));
  }
  int slots = 0;
  for (int i = 0; i < kMaxSlotIndex; ++i) {
    const std::string path = SlotPath(run_dir, i);
    if (!Exists(path)) continue;
    ++slots;
    const std::string claim = absl::StrCat(run_dir, "/worker-", i, ".claim");
    const int fd = open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EEXIST) continue;  // another add-worker has it
      return absl::InternalError(absl::StrCat("cannot create ", claim, ": ", std::strerror(errno)));
    }
    const std::string me = absl::StrCat(getpid(), "\n");
    ssize_t ignored = write(fd, me.data(), me.size());
    (void)ignored;
    close(fd);
    std::ifstream in(path);
    WorkerSlot slot;
    slot.index = i;
    std::string line;
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "env ")) {
        slot.env.push_back(line.substr(4));
      } else if (absl::StartsWith(line, "arg ")) {
        slot.argv.push_back(line.substr(4));
      } else if (!line.empty()) {
        return absl::DataLossError(absl::StrCat(path, ": unexpected line '", line, "'"));
      }
    }
    if (slot.argv.empty()) return absl::DataLossError(absl::StrCat(path, " names no worker binary"));
    return slot;
  }
  if (slots == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        run_dir, " has no room for another worker: start tandem local with --max_workers "
        "above --workers (each extra worker up to it gets a slot file there)"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "every one of the ", slots, " extra worker slot(s) of ", run_dir,
      " is taken: the job already runs --max_workers workers"));
}

std::vector<int> RunningAddedWorkers(const std::string& run_dir, int first_index, int end_index) {
  std::vector<int> pids;
  for (int i = first_index; i < end_index; ++i) {
    if (!Exists(absl::StrCat(run_dir, "/worker-", i, ".claim"))) continue;
    const int pid = ReadPidFile(absl::StrCat(run_dir, "/worker-", i, ".pid"));
    if (pid > 0 && kill(pid, 0) == 0) pids.push_back(pid);
  }
  return pids;
}

AddedWorkers CountAddedWorkers(const std::string& run_dir, int first_index, int end_index) {
  AddedWorkers n;
  for (int i = first_index; i < end_index; ++i) {
    if (!Exists(absl::StrCat(run_dir, "/worker-", i, ".claim"))) continue;
    ++n.started;
    auto exit = ReadFileToString(absl::StrCat(run_dir, "/worker-", i, ".exit"));
    if (!exit.ok()) continue;
    ++n.exited;
    if (absl::StartsWith(*exit, "exited with status 0")) ++n.clean;
  }
  return n;
}

absl::Status RunAddWorker(const AddWorkerOptions& o, std::FILE* out,
                          const std::function<bool()>& stop_requested) {
  if (o.run_dir.empty()) {
    return absl::InvalidArgumentError(
        "pass --run_dir, the run directory `tandem local` printed (or its --run_dir)");
  }
  ASSIGN_OR_RETURN(WorkerSlot slot, ClaimWorkerSlot(o.run_dir));
  const std::string name = absl::StrCat("worker-", slot.index);
  SubprocessOptions so;
  so.name = name;
  so.argv = slot.argv;
  so.env = slot.env;
  so.log_path = absl::StrCat(o.run_dir, "/", name, ".log");
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(so));
  RETURN_IF_ERROR(
      WriteFileAtomically(absl::StrCat(o.run_dir, "/", name, ".pid"), absl::StrCat(p->pid(), "\n")));
  std::fprintf(out, "tandem add-worker: started %s (pid %d); it joins at the next step boundary; "
                    "log %s\n",
               name.c_str(), p->pid(), so.log_path.c_str());
  std::fflush(out);
  while (!p->WaitFor(absl::Milliseconds(200))) {
    if (stop_requested()) {
      p->Stop(o.grace);
      return absl::CancelledError(absl::StrCat("interrupted; stopped ", name));
    }
  }
  // How it ended, for tandem local's summary (CountAddedWorkers).
  (void)WriteFileAtomically(absl::StrCat(o.run_dir, "/", name, ".exit"),
                            absl::StrCat(p->DescribeExit(), "\n"));
  if (!p->succeeded()) {
    return absl::AbortedError(absl::StrCat(name, " (pid ", p->pid(), ") ", p->DescribeExit(),
                                           "; last lines of ", so.log_path, ":\n",
                                           TailOfFile(so.log_path, 10)));
  }
  std::fprintf(out, "tandem add-worker: %s finished\n", name.c_str());
  return absl::OkStatus();
}

}  // namespace cli
}  // namespace tandem
