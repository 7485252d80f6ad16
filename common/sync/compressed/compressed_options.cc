#include "common/sync/compressed/compressed_options.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/codec/codec_factory.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {
namespace {

using codec::CodecConfig;

struct CodecDefaults {
  int64_t warmup_steps = 0;
  bool momentum_correction = false;
  bool masking = true;
};

CodecDefaults DefaultsFor(const std::string& codec) {
  if (codec == "topk" || codec == "threshold") return {200, true, false};
  if (codec == "powersgd") return {10, false, true};
  return {};
}

bool Has(const SyncOptions& o, const std::string& key) { return o.opts.count(key) != 0; }

std::string GetString(const SyncOptions& o, const std::string& key, const std::string& def) {
  auto it = o.opts.find(key);
  return it == o.opts.end() ? def : it->second;
}

absl::StatusOr<bool> GetFlag(const SyncOptions& o, const std::string& key, bool def,
                             const std::string& meaning) {
  ASSIGN_OR_RETURN(const int64_t v, GetSyncOptInt(o, key, def ? 1 : 0));
  if (v != 0 && v != 1) {
    return absl::InvalidArgumentError(absl::StrCat(key, " must be ", meaning, ", got ", v));
  }
  return v == 1;
}

// A key the chosen codec does not use is a mistake, not a no-op.
absl::Status CheckKeysApply(const SyncOptions& o, const std::string& codec) {
  const std::pair<const char*, const char*> uses[] = {
      {"k", "topk"},           {"density", "threshold"}, {"max_density", "threshold"},
      {"chunk", "int8"},       {"rounding", "int8"},     {"rank", "powersgd"},
      {"min_compression", "powersgd"}, {"embeddings", "powersgd"}};
  for (const auto& [key, user] : uses) {
    if (Has(o, key) && codec != user) {
      return absl::InvalidArgumentError(
          absl::StrCat(key, " applies to codec=", user, " only, but codec=", codec));
    }
  }
  if (codec != "powersgd") return absl::OkStatus();
  for (const char* key : {"momentum_correction", "masking", "hier", "min_bucket_kb"}) {
    if (Has(o, key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, " does not apply to codec=powersgd (its factors are summed by the ring; weights "
          "too small to compress go uncompressed by min_compression): drop ", key));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseCodec(const SyncOptions& o, ParsedCompressed* p) {
  CodecConfig& c = p->options.codec;
  c.codec = GetString(o, "codec", "int8");
  if (c.codec != "int8" && c.codec != "fp16" && c.codec != "bf16" && c.codec != "topk" &&
      c.codec != "threshold" && c.codec != "powersgd") {
    return absl::InvalidArgumentError(absl::StrCat("codec must be one of ",
                                                   CompressedCodecNames(), ", got '", c.codec,
                                                   "'"));
  }
  ASSIGN_OR_RETURN(c.k, GetSyncOptDouble(o, "k", 0.01));
  ASSIGN_OR_RETURN(c.density, GetSyncOptDouble(o, "density", 0.01));
  ASSIGN_OR_RETURN(c.max_density, GetSyncOptDouble(o, "max_density", 0));
  ASSIGN_OR_RETURN(c.chunk, GetSyncOptInt(o, "chunk", 1024));
  c.rounding = GetString(o, "rounding", "nearest");
  RETURN_IF_ERROR(CheckKeysApply(o, c.codec));
  if (!p->powersgd()) return codec::ValidateCodecConfig(c);
  ASSIGN_OR_RETURN(p->rank, GetSyncOptInt(o, "rank", 4));
  if (p->rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank (columns of PowerSGD's factors) must be >= 1, got ", p->rank));
  }
  ASSIGN_OR_RETURN(p->min_compression, GetSyncOptDouble(o, "min_compression", 2));
  if (!(p->min_compression >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_compression (least elements / factor floats for a weight to be compressed) must "
        "be >= 1, got ", p->min_compression));
  }
  ASSIGN_OR_RETURN(p->compress_embeddings,
                   GetFlag(o, "embeddings", false,
                           "0 (embedding tables uncompressed) or 1 (compressed like any weight)"));
  return absl::OkStatus();
}

absl::Status ParseFeedback(const SyncOptions& o, ParsedCompressed* p) {
  CompressedSyncOptions& out = p->options;
  const std::string& codec = out.codec.codec;
  const CodecDefaults d = DefaultsFor(codec);
  ASSIGN_OR_RETURN(out.error_feedback,
                   GetFlag(o, "ef", true, "1 (error feedback) or 0 (none)"));
  const bool sparse = codec == "topk" || codec == "threshold";
  ASSIGN_OR_RETURN(out.momentum_correction,
                   GetFlag(o, "momentum_correction",
                           d.momentum_correction && out.error_feedback,
                           "0 (momentum in the optimizer) or 1 (DGC momentum correction in "
                           "the strategy)"));
  p->default_momentum_correction = out.momentum_correction && !Has(o, "momentum_correction");
  ASSIGN_OR_RETURN(out.momentum_masking,
                   GetFlag(o, "masking", d.masking,
                           "1 (zero the velocity of sent values, DGC) or 0 (keep it)"));
  if (Has(o, "masking") && !out.momentum_correction) {
    return absl::InvalidArgumentError(
        "masking applies to momentum_correction=1 only: add momentum_correction=1 or drop masking");
  }
  if (out.momentum_correction && !sparse) {
    return absl::InvalidArgumentError(absl::StrCat(
        "momentum_correction=1 needs a sparse codec: use codec=topk or codec=threshold (got "
        "codec=", codec, "), or drop momentum_correction"));
  }
  if (out.momentum_correction && !out.error_feedback) {
    return absl::InvalidArgumentError(
        "momentum_correction=1 needs error feedback: the velocity is accumulated into the "
        "residuals; set ef=1 (the default) or drop momentum_correction");
  }
  ASSIGN_OR_RETURN(out.warmup_steps, GetSyncOptInt(o, "warmup_steps", d.warmup_steps));
  if (out.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("warmup_steps must be >= 0, got ", out.warmup_steps));
  }
  ASSIGN_OR_RETURN(out.hierarchical,
                   GetFlag(o, "hier", false,
                           "0 (exchange over every rank) or 1 (reduce inside each node first)"));
  ASSIGN_OR_RETURN(out.min_bucket_kb, GetSyncOptDouble(o, "min_bucket_kb", 0));
  if (!(out.min_bucket_kb >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_bucket_kb must be >= 0, got ", out.min_bucket_kb));
  }
  return absl::OkStatus();
}

}  // namespace

const char* CompressedCodecNames() { return "int8 | fp16 | bf16 | topk | threshold | powersgd"; }

absl::StatusOr<ParsedCompressed> ParseCompressedOptions(const SyncOptions& o) {
  ParsedCompressed p;
  RETURN_IF_ERROR(ParseCodec(o, &p));
  RETURN_IF_ERROR(ParseFeedback(o, &p));
  const std::string& codec = p.options.codec.codec;
  std::vector<std::string> keys;
  if (codec == "topk") keys = {"k"};
  if (codec == "threshold") keys = {"density"};
  if (codec == "powersgd") keys = {"rank", "min_compression", "embeddings"};
  keys.insert(keys.end(), {"ef", "warmup_steps"});
  if (codec == "topk" || codec == "threshold") keys.insert(keys.end(), {"momentum_correction"});
  if (p.options.momentum_correction) keys.push_back("masking");
  for (const std::string& k : keys) {
    if (!Has(o, k)) p.defaulted.push_back(k);
  }
  return p;
}

std::string ParsedCompressed::Header() const {
  const CompressedSyncOptions& o = options;
  const std::string& codec = o.codec.codec;
  std::string line = absl::StrCat("compressed: codec=", codec);
  if (codec == "int8") absl::StrAppend(&line, " chunk=", o.codec.chunk, " rounding=", o.codec.rounding);
  if (codec == "topk") absl::StrAppend(&line, " k=", o.codec.k);
  if (codec == "threshold") absl::StrAppend(&line, " density=", o.codec.density);
  if (powersgd()) {
    absl::StrAppend(&line, " rank=", rank, " min_compression=", min_compression,
                    " embeddings=", compress_embeddings ? 1 : 0);
  }
  absl::StrAppend(&line, " ef=", o.error_feedback ? 1 : 0, " warmup_steps=", o.warmup_steps);
  if (codec == "topk" || codec == "threshold") {
    absl::StrAppend(&line, " momentum_correction=", o.momentum_correction ? 1 : 0);
    if (o.momentum_correction) absl::StrAppend(&line, " masking=", o.momentum_masking ? 1 : 0);
  }
  if (o.hierarchical) absl::StrAppend(&line, " hier=1");
  if (o.min_bucket_kb > 0) absl::StrAppend(&line, " min_bucket_kb=", o.min_bucket_kb);
  if (!defaulted.empty()) {
    absl::StrAppend(&line, " (defaults for ", codec, ": ", absl::StrJoin(defaulted, ", "),
                    "; --sync_opt overrides each)");
  }
  return line;
}

}  // namespace sync
}  // namespace tandem
