#include "tools/tandem/convert_command.h"

#include <dirent.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/data/dataset_inputs.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "tools/convert/convert.h"
#include "tools/convert/npy_convert.h"

namespace tandem {
namespace cli {
namespace {

// The flags each mode takes besides mode, out_dir, name, records_per_shard.
const std::map<std::string, std::vector<std::string>>& ModeFlags() {
  static const auto* m = new std::map<std::string, std::vector<std::string>>{
      {"npy", {"features", "labels", "eval_features", "eval_labels"}},
      {"idx", {"images", "labels"}},
      {"tokens", {"tokens", "token_type", "seq_len"}},
      {"text", {"text", "text_dir", "seq_len", "eval_fraction"}},
      {"synthetic", {"num_records", "record_bytes", "seed"}},
  };
  return *m;
}

absl::Status CheckFlags(const ConvertCliOptions& o) {
  auto mode = ModeFlags().find(o.mode);
  if (mode == ModeFlags().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mode must be npy, idx, tokens, text or synthetic (got '", o.mode, "')"));
  }
  for (const std::string& flag : o.given) {
    if (flag == "mode" || flag == "out_dir" || flag == "name" || flag == "records_per_shard") {
      continue;
    }
    const std::vector<std::string>& ok = mode->second;
    if (std::find(ok.begin(), ok.end(), flag) == ok.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " is not a flag of --mode=",
                                                     o.mode, " (it takes --",
                                                     absl::StrJoin(ok, ", --"), ")"));
    }
  }
  if (o.out_dir.empty()) return absl::InvalidArgumentError("--out_dir is required");
  if (o.mode == "text" && o.text.empty() == o.text_dir.empty()) {
    return absl::InvalidArgumentError("--mode=text needs exactly one of --text or --text_dir");
  }
  if (o.mode == "tokens" && o.token_type != "u16" && o.token_type != "i32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--token_type must be u16 or i32, got ", o.token_type));
  }
  return absl::OkStatus();
}

// --out_dir must be new or an empty directory (one dataset per directory).
absl::Status CheckOutDir(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISDIR(st.st_mode)) {
    return absl::AlreadyExistsError(absl::StrCat("--out_dir ", dir, " is a file"));
  }
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot list: ", std::strerror(errno)));
  }
  bool empty = true;
  while (struct dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  }
  closedir(d);
  if (!empty) {
    return absl::AlreadyExistsError(absl::StrCat(
        "--out_dir ", dir, " exists and is not empty; give a new directory (each directory "
        "holds one dataset)"));
  }
  return absl::OkStatus();
}

void RemoveTree(const std::string& dir) {
  nftw(
      dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return remove(p); },
      16, FTW_DEPTH | FTW_PHYS);
}

std::string Shards(const convert::ConvertResult& r, const std::string& dir) {
  return absl::StrCat("wrote ", r.records, " records in ", r.files.size(), " shard(s) to ", dir);
}

absl::StatusOr<std::string> ConvertNpy(const ConvertCliOptions& o, convert::ShardOutput out,
                                       const std::string& shown) {
  convert::NpySources src;
  src.train = {o.features, o.labels};
  src.eval = {o.eval_features, o.eval_labels};
  ASSIGN_OR_RETURN(convert::NpyResult r, convert::NpyToShards(src, out));
  const data::DatasetInputs in = *data::ClassifyDataset(r.info);
  std::string text = absl::StrCat(
      "wrote ", r.train.records, " train samples (features ",
      data::DescribeSpec(r.info.feature_spec()), ", ", r.info.num_classes(), " classes) to ",
      shown, "/train");
  if (r.eval.records > 0) absl::StrAppend(&text, " and ", r.eval.records, " eval samples to ", shown, "/eval");
  absl::StrAppend(&text, "\ntrain on it: tandem local --dataset=", shown);
  if (in.feature_dtype == v1::DTYPE_F32 || in.feature_dtype == v1::DTYPE_U8) {
    absl::StrAppend(&text, " --model=mlp:", in.sample_elements, ",256,", in.num_classes);
  }
  return text;
}

absl::StatusOr<std::string> ConvertText(const ConvertCliOptions& o,
                                        const convert::ShardOutput& out,
                                        const std::string& shown) {
  std::vector<std::string> files = o.text;
  if (!o.text_dir.empty()) {
    ASSIGN_OR_RETURN(files, convert::TextFilesIn(o.text_dir));
  }
  convert::ShardOutput train = out, eval = out;
  train.out_dir = out.out_dir + "/train";
  eval.out_dir = out.out_dir + "/eval";
  RETURN_IF_ERROR(MakeDirectories(train.out_dir));
  RETURN_IF_ERROR(MakeDirectories(eval.out_dir));
  convert::TextOptions topt;
  topt.seq_len = o.seq_len;
  topt.eval_fraction = o.eval_fraction;
  ASSIGN_OR_RETURN(convert::TextResult t, convert::TextToShards(files, topt, train, eval));
  return absl::StrFormat(
      "read %d bytes from %d file(s); wrote %d train records to %s/train and %d eval records "
      "to %s/eval (%d-byte tail dropped)",
      t.bytes, files.size(), t.train.records, shown, t.eval.records, shown,
      t.train.dropped_tokens);
}

// Runs o.mode's conversion into `dir`; the summary names `shown` instead.
absl::StatusOr<std::string> ConvertInto(const ConvertCliOptions& o, const std::string& dir,
                                        const std::string& shown) {
  convert::ShardOutput out;
  out.out_dir = dir;
  out.name = o.name;
  out.records_per_shard = o.records_per_shard;
  if (o.mode == "npy") return ConvertNpy(o, out, shown);
  if (o.mode == "text") return ConvertText(o, out, shown);
  convert::ConvertResult r;
  if (o.mode == "idx") {
    ASSIGN_OR_RETURN(r, convert::IdxToShards(o.images, o.labels, out));
  } else if (o.mode == "tokens") {
    ASSIGN_OR_RETURN(r, convert::TokensToShards(o.tokens,
                                                o.token_type == "u16" ? convert::TokenType::kU16
                                                                      : convert::TokenType::kI32,
                                                o.seq_len, out));
  } else {
    ASSIGN_OR_RETURN(r, convert::SyntheticShards(o.num_records, o.record_bytes,
                                                 static_cast<uint64_t>(o.seed), out));
  }
  std::string text = Shards(r, shown);
  if (r.dropped_tokens > 0) absl::StrAppend(&text, " (dropped a ", r.dropped_tokens, "-token tail)");
  return text;
}

bool IsInputError(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsDataLoss(s) ||
         absl::IsAlreadyExists(s) || absl::IsOutOfRange(s);
}

}  // namespace

FlagTable ConvertFlags(ConvertCliOptions* o) {
  FlagTable t("tandem convert",
              "Converts arrays, IDX files, token files or text into one tandem dataset: a\n"
              "directory of record shards that tandem local --dataset=DIR and the data server "
              "serve.");
  t.Section("every mode");
  t.String("mode", &o->mode, "npy | idx | tokens | text | synthetic");
  t.String("out_dir", &o->out_dir, "Output directory, new or empty (written only on success).");
  t.String("name", &o->name, "Shard file name prefix.");
  t.Int64("records_per_shard", &o->records_per_shard, "Records per shard file.");
  t.Section("--mode=npy (numpy arrays; writes out_dir/train and out_dir/eval)");
  t.String("features", &o->features,
           "Features (N, ...): float32, uint8, int32 or int64, C order.");
  t.String("labels", &o->labels,
           "npy: class labels (N,), int32 or int64. idx: the gzipped IDX labels file.");
  t.String("eval_features", &o->eval_features, "Eval features, shaped like --features.");
  t.String("eval_labels", &o->eval_labels, "Eval labels (optional, with --eval_features).");
  t.Section("--mode=idx (MNIST-style IDX files)");
  t.String("images", &o->images, "The gzipped IDX images file.");
  t.Section("--mode=tokens and --mode=text (language-model windows)");
  t.String("tokens", &o->tokens, "tokens: a raw little-endian token file.");
  t.String("token_type", &o->token_type, "tokens: u16 | i32");
  t.Int64("seq_len", &o->seq_len, "Tokens per sample (the model's context).");
  t.StringList("text", &o->text, "text: text files, comma-separated, in order.");
  t.String("text_dir", &o->text_dir,
           "text: a directory of text files (regular, not *.dat), e.g. /usr/share/games/fortunes.");
  t.Double("eval_fraction", &o->eval_fraction, "text: the last fraction of windows -> eval.");
  t.Section("--mode=synthetic (random bytes, for benchmarks)");
  t.Int64("num_records", &o->num_records, "Records.");
  t.Int64("record_bytes", &o->record_bytes, "Feature bytes per record.");
  t.Int64("seed", &o->seed, "Random seed.");
  return t;
}

absl::StatusOr<std::string> RunConvert(const ConvertCliOptions& o) {
  RETURN_IF_ERROR(CheckFlags(o));
  std::string out_dir = o.out_dir;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  RETURN_IF_ERROR(CheckOutDir(out_dir));
  const size_t slash = out_dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(MakeDirectories(out_dir.substr(0, slash)));
  }
  std::string tmp = out_dir + ".tmp-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a directory next to ", out_dir, ": ", std::strerror(errno)));
  }
  absl::StatusOr<std::string> summary = ConvertInto(o, tmp, out_dir);
  if (summary.ok()) {
    rmdir(out_dir.c_str());  // an empty --out_dir is replaced
    if (rename(tmp.c_str(), out_dir.c_str()) != 0) {
      summary = absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", out_dir,
                                                    ": ", std::strerror(errno)));
    }
  }
  if (!summary.ok()) RemoveTree(tmp);
  return summary;
}

int RunConvertCommand(const ConvertCliOptions& o, std::FILE* out, std::FILE* err) {
  absl::StatusOr<std::string> summary = RunConvert(o);
  if (!summary.ok()) {
    std::fprintf(err, "tandem convert: %s\n", std::string(summary.status().message()).c_str());
    return IsInputError(summary.status()) ? 2 : 1;
  }
  std::fprintf(out, "%s\n", summary->c_str());
  return 0;
}

int ConvertMain(const std::vector<std::string>& args) {
  ConvertCliOptions o;
  FlagTable t = ConvertFlags(&o);
  absl::StatusOr<FlagTable::Parsed> p = t.Parse(args);
  if (!p.ok()) {
    std::fprintf(stderr, "tandem convert: %s\n", std::string(p.status().message()).c_str());
    return 2;
  }
  if (p->help) {
    std::fputs(t.Help().c_str(), stdout);
    return 0;
  }
  if (!p->positionals.empty()) {
    std::fprintf(stderr, "tandem convert: unexpected argument '%s' (flags are --name=value)\n",
                 p->positionals.front().c_str());
    return 2;
  }
  o.given = p->given;
  return RunConvertCommand(o, stdout, stderr);
}

}  // namespace cli
}  // namespace tandem
