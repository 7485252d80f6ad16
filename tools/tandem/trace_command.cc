#include "tools/tandem/trace_command.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/io/file.h"
#include "common/trace/chrome_json.h"

namespace tandem {
namespace cli {
namespace {

constexpr char kMarker[] = ".traced";

std::string TraceDir(const std::string& run_dir) { return run_dir + "/trace"; }
std::string TraceFile(const std::string& run_dir, const std::string& name) {
  return absl::StrCat(TraceDir(run_dir), "/", name, ".json");
}

// What identifies one version of a file: rewritten means renamed over.
struct FileVersion {
  bool exists = false;
  ino_t inode = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion& o) const {
    return exists == o.exists && inode == o.inode && mtime_ns == o.mtime_ns;
  }
};

FileVersion VersionOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// The pid of traced child `name` when it is running with its trace file;
// -1 otherwise (exited, or the pid now belongs to another process).
int LiveTracedPid(const std::string& run_dir, const std::string& name) {
  int pid = -1;
  std::ifstream in(absl::StrCat(run_dir, "/", name, ".pid"));
  if (!(in >> pid) || pid <= 0 || kill(pid, 0) != 0) return -1;
  absl::StatusOr<std::string> cmdline = ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline"));
  const std::string flag = "--trace_file=" + TraceFile(run_dir, name);
  if (!cmdline.ok() || !absl::StrContains(*cmdline, flag)) return -1;
  return pid;
}

absl::StatusOr<std::vector<std::string>> TracedNames(const std::string& run_dir) {
  std::vector<std::string> names;
  DIR* d = opendir(TraceDir(run_dir).c_str());
  if (d == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        run_dir, " holds no trace (no ", TraceDir(run_dir),
        "): start the run with `tandem local --trace --run_dir ", run_dir, "`"));
  }
  for (dirent* e = readdir(d); e != nullptr; e = readdir(d)) {
    const std::string f = e->d_name;
    if (absl::EndsWith(f, kMarker)) names.push_back(f.substr(0, f.size() - sizeof(kMarker) + 1));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The merge of `texts` written (atomically) to `path`.
absl::Status MergeInto(const std::vector<std::string>& texts, const std::string& path) {
  absl::StatusOr<std::string> merged = trace::MergeChromeTraces(texts);
  if (!merged.ok()) return merged.status();
  return WriteFileAtomically(path, *merged);
}

}  // namespace

std::vector<std::string> TraceChildArgs(const std::string& run_dir, const std::string& name,
                                        int trace_steps) {
  (void)MakeDirectories(TraceDir(run_dir));
  std::ofstream(absl::StrCat(TraceDir(run_dir), "/", name, kMarker)).flush();
  return {"--trace", absl::StrCat("--trace_steps=", trace_steps),
          "--trace_file=" + TraceFile(run_dir, name)};
}

absl::StatusOr<TraceCollection> CollectRunTrace(const std::string& run_dir,
                                                absl::Duration timeout) {
  absl::StatusOr<std::vector<std::string>> names = TracedNames(run_dir);
  if (!names.ok()) return names.status();
  TraceCollection c;
  std::map<std::string, FileVersion> asked;  // name -> the version before the signal
  for (const std::string& name : *names) {
    const int pid = LiveTracedPid(run_dir, name);
    if (pid < 0) continue;
    const FileVersion before = VersionOf(TraceFile(run_dir, name));
    if (kill(pid, SIGUSR1) == 0) asked[name] = before;
  }
  c.signalled = static_cast<int>(asked.size());
  // Each process's trace thread serves the signal within ~0.1 s.
  const absl::Time deadline = absl::Now() + timeout;
  for (auto it = asked.begin(); it != asked.end();) {
    if (!(VersionOf(TraceFile(run_dir, it->first)) == it->second)) {
      it = asked.erase(it);
    } else if (absl::Now() >= deadline) {
      c.missing.push_back(absl::StrCat(it->first, " did not rewrite its trace within ",
                                       absl::FormatDuration(timeout)));
      it = asked.erase(it);
    } else {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  std::vector<std::string> texts;
  for (const std::string& name : *names) {
    absl::StatusOr<std::string> text = ReadFileToString(TraceFile(run_dir, name));
    if (!text.ok()) {
      // No pid file either: a --max_workers slot no `tandem add-worker` used.
      struct stat st;
      if (stat(absl::StrCat(run_dir, "/", name, ".pid").c_str(), &st) != 0) continue;
      c.missing.push_back(absl::StrCat(name, " wrote no trace (it was killed, or exited at once)"));
      continue;
    }
    texts.push_back(std::move(*text));
  }
  if (texts.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no process of the run in ", run_dir, " has written a trace yet: ",
        absl::StrJoin(c.missing, "; ")));
  }
  c.path = run_dir + "/trace.json";
  if (absl::Status s = MergeInto(texts, c.path); !s.ok()) return s;
  c.files = static_cast<int>(texts.size());
  return c;
}

absl::StatusOr<TraceCollection> MergeTraceDir(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read ", dir, ": ", std::strerror(errno)));
  }
  for (dirent* e = readdir(d); e != nullptr; e = readdir(d)) {
    const std::string f = e->d_name;
    if (absl::EndsWith(f, ".json") && f != "trace.json") files.push_back(dir + "/" + f);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no trace files in ", dir, ": run the processes with --trace --trace_file=", dir, "/"));
  }
  std::vector<std::string> texts;
  for (const std::string& f : files) {
    absl::StatusOr<std::string> text = ReadFileToString(f);
    if (!text.ok()) return text.status();
    texts.push_back(std::move(*text));
  }
  TraceCollection c;
  c.path = dir + "/trace.json";
  if (absl::Status s = MergeInto(texts, c.path); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (files in ", dir, ", by name: ",
                                               absl::StrJoin(files, ", "), ")"));
  }
  c.files = static_cast<int>(files.size());
  return c;
}

std::string FormatTraceCollection(const TraceCollection& c) {
  std::string out = absl::StrCat("trace: ", c.path, " (", c.files,
                                 " process(es) on the coordinator's clock; open it in "
                                 "https://ui.perfetto.dev or chrome://tracing)");
  for (const std::string& m : c.missing) absl::StrAppend(&out, "\ntrace: ", m);
  return out;
}

}  // namespace cli
}  // namespace tandem
