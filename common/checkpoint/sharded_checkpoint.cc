#include "common/checkpoint/sharded_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/io/crc32c.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace checkpoint {
namespace {

constexpr char kMagic[] = "tandem-manifest 1";

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

absl::Status BadManifest(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("manifest ", path, " is not usable: ", what,
                                          "; restore from an earlier checkpoint"));
}

// Empty when the shards tile [0, n) in ascending order, else what is wrong.
std::string TilingProblem(const Manifest& m) {
  int64_t next = 0;
  for (const ManifestShard& s : m.shards) {
    if (s.lo != next || s.hi <= s.lo) {
      return absl::StrCat("shard ", s.file, " covers [", s.lo, ", ", s.hi, ") but the next range ",
                          "should start at ", next, " and be non-empty");
    }
    if (s.file.empty() || s.file.find_first_of("/ \t\n") != std::string::npos) {
      return absl::StrCat("shard file name '", s.file, "' is empty or has '/' or whitespace");
    }
    next = s.hi;
  }
  if (next != m.total_params) {
    return absl::StrCat("shards cover [0, ", next, ") but the vector has ", m.total_params,
                        " values");
  }
  return "";
}

}  // namespace

std::string ManifestPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step-%08d.manifest", dir, static_cast<long long>(step));
}

std::string ShardFileName(int64_t step, int rank, int world) {
  return absl::StrFormat("step-%08d.shard-%05d-of-%05d.tckpt", static_cast<long long>(step), rank,
                         world);
}

bool IsManifestPath(absl::string_view path) { return absl::EndsWith(path, ".manifest"); }

absl::StatusOr<std::vector<ShardWriter>> PlanShardWriters(
    const std::vector<optim::ParamRange>& owned_by_rank, int64_t total_params) {
  std::vector<ShardWriter> writers;
  for (size_t r = 0; r < owned_by_rank.size(); ++r) {
    const optim::ParamRange& o = owned_by_rank[r];
    if (o.size() <= 0) continue;
    bool seen = false;
    for (const ShardWriter& w : writers) seen = seen || (w.lo == o.lo && w.hi == o.hi);
    if (!seen) writers.push_back({static_cast<int>(r), o.lo, o.hi});
  }
  std::sort(writers.begin(), writers.end(),
            [](const ShardWriter& a, const ShardWriter& b) { return a.lo < b.lo; });
  int64_t next = 0;
  for (const ShardWriter& w : writers) {
    if (w.lo != next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ranks' owned ranges do not tile the vector: rank ", w.rank, " owns [", w.lo, ", ",
          w.hi, ") but the next range should start at ", next));
    }
    next = w.hi;
  }
  if (next != total_params) {
    return absl::InvalidArgumentError(absl::StrCat("the ranks' owned ranges cover [0, ", next,
                                                   ") of ", total_params, " values"));
  }
  return writers;
}

absl::Status WriteManifest(const std::string& path, const Manifest& m) {
  const std::string problem = TilingProblem(m);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("manifest ", path, ": ", problem));
  }
  std::string text = absl::StrCat(kMagic, "\n");
  absl::StrAppend(&text, "fingerprint ", m.model_fingerprint, "\n");
  absl::StrAppend(&text, "step ", m.step, "\n");
  absl::StrAppend(&text, "total_params ", m.total_params, "\n");
  absl::StrAppend(&text, "world_size ", m.world_size, "\n");
  absl::StrAppend(&text, "strategy ", m.strategy.empty() ? "-" : m.strategy, "\n");
  absl::StrAppend(&text, "optimizer ", m.optimizer_name.empty() ? "-" : m.optimizer_name, "\n");
  for (const ManifestShard& s : m.shards) {
    absl::StrAppend(&text, "shard ", s.lo, " ", s.hi, " ", s.file, "\n");
  }
  absl::StrAppend(&text, absl::StrFormat("crc32c %08x\n", Crc32c(text.data(), text.size())));
  return WriteFileAtomically(path, text);
}

absl::StatusOr<Manifest> ReadManifest(const std::string& path, const ReadOptions& options) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("manifest ", path, ": ", text.status().message()));
  }
  const size_t crc_at = text->rfind("crc32c ");
  if (!absl::StartsWith(*text, kMagic) || crc_at == std::string::npos) {
    return BadManifest(path, "no 'tandem-manifest 1' header or crc32c line");
  }
  uint32_t want = 0;
  const std::string crc_text(absl::StripAsciiWhitespace(text->substr(crc_at + 7)));
  if (!absl::SimpleHexAtoi(crc_text, &want) || want != Crc32c(text->data(), crc_at)) {
    return BadManifest(path, "checksum mismatch (truncated or edited)");
  }
  Manifest m;
  bool have[6] = {false, false, false, false, false, false};
  for (absl::string_view line : absl::StrSplit(text->substr(0, crc_at), '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.empty() || line == kMagic) continue;
    bool ok = true;
    if (f[0] == "fingerprint" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &m.model_fingerprint);
      have[0] = true;
    } else if (f[0] == "step" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &m.step);
      have[1] = true;
    } else if (f[0] == "total_params" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &m.total_params);
      have[2] = true;
    } else if (f[0] == "world_size" && f.size() == 2) {
      ok = absl::SimpleAtoi(f[1], &m.world_size);
      have[3] = true;
    } else if (f[0] == "strategy" && f.size() == 2) {
      m.strategy = f[1] == "-" ? "" : f[1];
      have[4] = true;
    } else if (f[0] == "optimizer" && f.size() == 2) {
      m.optimizer_name = f[1] == "-" ? "" : f[1];
      have[5] = true;
    } else if (f[0] == "shard" && f.size() == 4) {
      ManifestShard s;
      ok = absl::SimpleAtoi(f[1], &s.lo) && absl::SimpleAtoi(f[2], &s.hi);
      s.file = f[3];
      m.shards.push_back(std::move(s));
    } else {
      ok = false;
    }
    if (!ok) return BadManifest(path, absl::StrCat("cannot parse line '", line, "'"));
  }
  for (bool h : have) {
    if (!h) return BadManifest(path, "a header key is missing");
  }
  const std::string problem = TilingProblem(m);
  if (!problem.empty()) return BadManifest(path, problem);
  if (options.expected_model_fingerprint.has_value() &&
      *options.expected_model_fingerprint != m.model_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "manifest ", path, " was written for another model (fingerprint ", m.model_fingerprint,
        ", this model's is ", *options.expected_model_fingerprint,
        "): start without it or use the model it was written for"));
  }
  return m;
}

absl::StatusOr<Checkpoint> ReadShardedCheckpoint(const std::string& manifest_path,
                                                 const ReadOptions& options) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(manifest_path, options));
  const std::string dir = DirOf(manifest_path);
  Checkpoint whole;
  whole.model_fingerprint = m.model_fingerprint;
  whole.step = m.step;
  whole.total_params = m.total_params;
  whole.range_lo = 0;
  whole.range_hi = m.total_params;
  whole.optimizer_name = m.optimizer_name;
  whole.params.resize(m.total_params);
  ReadOptions shard_options;
  shard_options.expected_model_fingerprint = m.model_fingerprint;
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ManifestShard& s = m.shards[i];
    const std::string path = absl::StrCat(dir, "/", s.file);
    absl::StatusOr<Checkpoint> c = ReadCheckpoint(path, shard_options);
    if (!c.ok()) {
      return absl::Status(c.status().code(),
                          absl::StrCat("shard ", path, " of manifest ", manifest_path, ": ",
                                       c.status().message()));
    }
    auto mismatch = [&](absl::string_view what) {
      return absl::DataLossError(absl::StrCat("shard ", path, " does not match manifest ",
                                              manifest_path, ": ", what,
                                              "; restore from an earlier checkpoint"));
    };
    if (c->step != m.step) {
      return mismatch(absl::StrCat("it is of step ", c->step, ", the manifest of ", m.step));
    }
    if (c->total_params != m.total_params || c->range_lo != s.lo || c->range_hi != s.hi) {
      return mismatch(absl::StrCat("it holds [", c->range_lo, ", ", c->range_hi, ") of ",
                                   c->total_params, ", the manifest says [", s.lo, ", ", s.hi,
                                   ") of ", m.total_params));
    }
    if (c->optimizer_name != m.optimizer_name) {
      return mismatch(absl::StrCat("optimizer '", c->optimizer_name, "', the manifest's is '",
                                   m.optimizer_name, "'"));
    }
    if (i == 0) {
      for (const auto& [name, values] : c->optimizer_state) {
        whole.optimizer_state.push_back({name, std::vector<float>(m.total_params)});
      }
      whole.blobs = std::move(c->blobs);
    }
    if (c->optimizer_state.size() != whole.optimizer_state.size()) {
      return mismatch(absl::StrCat(c->optimizer_state.size(), " optimizer buffers, the first "
                                   "shard has ", whole.optimizer_state.size()));
    }
    std::memcpy(whole.params.data() + s.lo, c->params.data(), c->params.size() * sizeof(float));
    for (auto& [name, values] : whole.optimizer_state) {
      const std::vector<float>* src = c->FindOptimizerState(name);
      if (src == nullptr) return mismatch(absl::StrCat("no optimizer buffer '", name, "'"));
      std::memcpy(values.data() + s.lo, src->data(), src->size() * sizeof(float));
    }
  }
  return whole;
}

absl::StatusOr<Checkpoint> ReadWholeCheckpoint(const std::string& path,
                                               const ReadOptions& options) {
  if (IsManifestPath(path)) return ReadShardedCheckpoint(path, options);
  ASSIGN_OR_RETURN(Checkpoint c, ReadCheckpoint(path, options));
  if (c.range_lo != 0 || c.range_hi != c.total_params) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", path, " holds only [", c.range_lo, ", ", c.range_hi, ") of ",
        c.total_params, " values: load it through the manifest that lists all its shards"));
  }
  return c;
}

absl::Status RestoreOptimizerSlice(const Checkpoint& c, optim::Optimizer* optimizer) {
  const optim::ParamRange& r = optimizer->range();
  if (c.optimizer_name != optimizer->name()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds state of optimizer '", c.optimizer_name, "' but the job uses '",
        optimizer->name(), "'; use the same optimizer or start its state from zero"));
  }
  if (r.lo < c.range_lo || r.hi > c.range_hi) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds optimizer state for [", c.range_lo, ", ", c.range_hi,
        ") which does not contain this optimizer's range [", r.lo, ", ", r.hi, ")"));
  }
  std::vector<optim::StateBuffer> buffers = optimizer->state();
  if (buffers.size() != c.optimizer_state.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint holds ", c.optimizer_state.size(), " optimizer state buffers but '",
        optimizer->name(), "' has ", buffers.size(), " (different options, e.g. momentum on/off?)"));
  }
  std::vector<const float*> sources;
  for (const optim::StateBuffer& b : buffers) {
    const std::vector<float>* src = c.FindOptimizerState(b.name);
    if (src == nullptr || static_cast<int64_t>(src->size()) != c.range_hi - c.range_lo ||
        static_cast<int64_t>(b.data.size()) != r.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint has no optimizer state '", b.name, "' over [", c.range_lo, ", ", c.range_hi,
          ")"));
    }
    sources.push_back(src->data() + (r.lo - c.range_lo));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (r.size() > 0) std::memcpy(buffers[i].data.data(), sources[i], r.size() * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace checkpoint
}  // namespace tandem
