#include "common/plan/machine_profile.h"

#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace plan {
namespace {

// The numeric fields, in file order, with their meaning for the file's
// comments. One table for parse and format, so they cannot drift.
struct Field {
  const char* key;
  const char* meaning;
  std::function<double&(MachineProfile&)> ref;
  bool optional = false;  // 0 allowed: "not known / not used"
};

const std::vector<Field>& Fields() {
  static const auto* fields = new std::vector<Field>{
      {"gemm_flops_per_s", "one rank's sgemm at the model's shapes",
       [](MachineProfile& p) -> double& { return p.gemm_flops_per_s; }},
      {"stream_bytes_per_s", "one core's bytes read + written per second",
       [](MachineProfile& p) -> double& { return p.stream_bytes_per_s; }},
      {"codec_bytes_per_s", "int8 encode rate, fp32 bytes per second",
       [](MachineProfile& p) -> double& { return p.codec_bytes_per_s; }},
      {"loopback_bytes_per_s", "unshaped TCP between processes of one host",
       [](MachineProfile& p) -> double& { return p.loopback_bytes_per_s; }},
      {"link_alpha_s", "seconds per message round across a link",
       [](MachineProfile& p) -> double& { return p.link_alpha_s; }},
      {"ring_round_2_s", "a ring round among 2 processes of this host; 0 = not measured",
       [](MachineProfile& p) -> double& { return p.ring_round_2_s; }, true},
      {"ring_round_4_s", "... among 4",
       [](MachineProfile& p) -> double& { return p.ring_round_4_s; }, true},
      {"ring_round_8_s", "... among 8",
       [](MachineProfile& p) -> double& { return p.ring_round_8_s; }, true},
      {"ring_round_16_s", "... among 16",
       [](MachineProfile& p) -> double& { return p.ring_round_16_s; }, true},
      {"shard_round_2_s",
       "a round of shard-server push + pull calls by 2 processes of this host; 0 = not measured",
       [](MachineProfile& p) -> double& { return p.shard_round_2_s; }, true},
      {"shard_round_4_s", "... by 4",
       [](MachineProfile& p) -> double& { return p.shard_round_4_s; }, true},
      {"shard_round_8_s", "... by 8",
       [](MachineProfile& p) -> double& { return p.shard_round_8_s; }, true},
      {"shard_round_16_s", "... by 16",
       [](MachineProfile& p) -> double& { return p.shard_round_16_s; }, true},
      {"ring_round_cpu_2_s",
       "CPU seconds one process spends per round of a ring of 2; 0 = not measured",
       [](MachineProfile& p) -> double& { return p.ring_round_cpu_2_s; }, true},
      {"ring_round_cpu_4_s", "... of 4",
       [](MachineProfile& p) -> double& { return p.ring_round_cpu_4_s; }, true},
      {"ring_round_cpu_8_s", "... of 8",
       [](MachineProfile& p) -> double& { return p.ring_round_cpu_8_s; }, true},
      {"ring_round_cpu_16_s", "... of 16",
       [](MachineProfile& p) -> double& { return p.ring_round_cpu_16_s; }, true},
      {"shard_call_cpu_s",
       "CPU seconds of one shard-server chunk push + pull, both ends; 0 = not measured",
       [](MachineProfile& p) -> double& { return p.shard_call_cpu_s; }, true},
      {"step_cpu_s",
       "CPU seconds a worker spends per step beyond compute, rounds, calls; 0 = not measured",
       [](MachineProfile& p) -> double& { return p.step_cpu_s; }, true},
      {"job_round_cpu_s",
       "CPU seconds per gradient ring round in a real job; 0 = the bare rings' least",
       [](MachineProfile& p) -> double& { return p.job_round_cpu_s; }, true},
      {"shm_alpha_s", "seconds per shared-memory (gpu: NVLink) round",
       [](MachineProfile& p) -> double& { return p.shm_alpha_s; }},
      {"intra_node_bytes_per_s", "between the ranks of a node per direction; 0 = shared memory",
       [](MachineProfile& p) -> double& { return p.intra_node_bytes_per_s; }, true},
      {"node_link_bits_per_s", "a node's network when no --link is given; 0 = loopback",
       [](MachineProfile& p) -> double& { return p.node_link_bits_per_s; }, true},
      {"memory_bytes_per_rank", "memory one rank may hold; 0 = not checked",
       [](MachineProfile& p) -> double& { return p.memory_bytes_per_rank; }, true},
  };
  return *fields;
}

}  // namespace

absl::Status ValidateCluster(const Cluster& c) {
  if (c.nodes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes must be at least 1, got ", c.nodes));
  }
  if (c.per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers_per_node must be at least 1, got ", c.per_node));
  }
  if (c.servers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard_servers must be 0 or more, got ", c.servers));
  }
  if (!(c.link_bits_per_s >= 0) || !std::isfinite(c.link_bits_per_s)) {
    return absl::InvalidArgumentError("--link must be a positive rate such as 1gbit or 100mbit");
  }
  if (!(c.cpu_share > 0 && c.cpu_share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cpu_share must be in (0, 1] (the share of this host's cores the job gets), got ",
        c.cpu_share));
  }
  if (!(c.server_link_bits_per_s >= 0) || !std::isfinite(c.server_link_bits_per_s)) {
    return absl::InvalidArgumentError("--server_link must be a positive rate such as 1gbit");
  }
  return absl::OkStatus();
}

namespace {

// Seconds measured at 2, 4, 8, 16 processes (0 = not measured) at
// `ranks`: linear in log2(ranks) between the nearest measured sizes, the
// nearest one's outside them; `none` when nothing was measured.
double InterpolateRounds(const double (&at)[4], int ranks, double none) {
  std::vector<std::pair<double, double>> known;  // (log2 ranks, seconds)
  for (int i = 0; i < 4; ++i) {
    if (at[i] > 0) known.push_back({i + 1.0, at[i]});
  }
  if (known.empty()) return none;
  const double x = std::log2(std::max(ranks, 1));
  if (x <= known.front().first) return known.front().second;
  for (size_t i = 1; i < known.size(); ++i) {
    if (x > known[i].first) continue;
    const auto [x0, y0] = known[i - 1];
    const auto [x1, y1] = known[i];
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  }
  return known.back().second;
}

}  // namespace

double RingRoundSeconds(const MachineProfile& p, int ranks) {
  const double at[4] = {p.ring_round_2_s, p.ring_round_4_s, p.ring_round_8_s, p.ring_round_16_s};
  return InterpolateRounds(at, ranks, p.link_alpha_s);
}

double RingRoundCpuSeconds(const MachineProfile& p, int ranks) {
  const double at[4] = {p.ring_round_cpu_2_s, p.ring_round_cpu_4_s, p.ring_round_cpu_8_s,
                        p.ring_round_cpu_16_s};
  return InterpolateRounds(at, ranks, 0);
}

double ShardRoundSeconds(const MachineProfile& p, int workers) {
  const double at[4] = {p.shard_round_2_s, p.shard_round_4_s, p.shard_round_8_s,
                        p.shard_round_16_s};
  return InterpolateRounds(at, workers, 0);
}

std::string FormatMachineProfile(const MachineProfile& p) {
  MachineProfile copy = p;
  std::string out = absl::StrCat("# tandem plan machine profile: ", p.source, "\n");
  absl::StrAppend(&out, "source = ", p.source, "\n");
  absl::StrAppend(&out, "kind = ", p.kind, "\n");
  absl::StrAppend(&out, "cores = ", p.cores, "\n");
  for (const Field& f : Fields()) {
    absl::StrAppend(&out, "# ", f.meaning, "\n", f.key, " = ", f.ref(copy), "\n");
  }
  return out;
}

absl::StatusOr<MachineProfile> ParseMachineProfile(const std::string& text,
                                                   const std::string& origin) {
  MachineProfile p;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    const std::string where = absl::StrCat(origin, ":", line_no);
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": expected `key = value`, got '",
                                                     line, "'"));
    }
    const std::string key(absl::StripAsciiWhitespace(kv[0]));
    const std::string value(absl::StripAsciiWhitespace(kv[1]));
    if (key == "source") {
      p.source = value;
      continue;
    }
    if (key == "kind") {
      if (value != "cpu" && value != "gpu") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": kind must be cpu or gpu, got '", value, "'"));
      }
      p.kind = value;
      continue;
    }
    if (key == "cores") {
      if (!absl::SimpleAtoi(value, &p.cores) || p.cores < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": cores must be a whole number >= 1, got '", value, "'"));
      }
      continue;
    }
    bool known = false;
    for (const Field& f : Fields()) {
      if (key != f.key) continue;
      known = true;
      double v = 0;
      const bool parsed = absl::SimpleAtod(value, &v) && std::isfinite(v);
      if (!parsed || !(f.optional ? v >= 0 : v > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " must be a ",
                                                       f.optional ? "number >= 0" : "positive number",
                                                       ", got '", value, "'"));
      }
      f.ref(p) = v;
    }
    if (!known) {
      std::string keys = "source, kind, cores";
      for (const Field& f : Fields()) absl::StrAppend(&keys, ", ", f.key);
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown key '", key, "' (known: ", keys, ")"));
    }
  }
  return p;
}

absl::StatusOr<MachineProfile> LoadMachineProfile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseMachineProfile(text, path);
}

absl::Status SaveMachineProfile(const MachineProfile& p, const std::string& path) {
  return WriteFileAtomically(path, FormatMachineProfile(p));
}

}  // namespace plan
}  // namespace tandem
