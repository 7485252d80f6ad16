// convert: writes tandem record-shard datasets.
//
//   convert --mode=idx --images=.../train-images-idx3-ubyte.gz
//           --labels=.../train-labels-idx1-ubyte.gz --out_dir=/data/fm --name=train
//   convert --mode=tokens --tokens=corpus.u16 --token_type=u16 --seq_len=256
//           --out_dir=/data/lm --name=lm
//   convert --mode=text --text_dir=/usr/share/games/fortunes --seq_len=128
//           --eval_fraction=0.05 --out_dir=/data/fortunes --name=fortunes
//     (or --text=a.txt,b.txt; writes <out_dir>/train/ and <out_dir>/eval/,
//      serve with --dataset=fortunes/train=/data/fortunes/train,...)
//   convert --mode=synthetic --num_records=4096 --record_bytes=65536 --out_dir=/tmp/s
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/convert/convert.h"

ABSL_FLAG(std::string, mode, "", "idx | tokens | text | synthetic");
ABSL_FLAG(std::string, images, "", "idx: gzipped IDX images file");
ABSL_FLAG(std::string, labels, "", "idx: gzipped IDX labels file");
ABSL_FLAG(std::string, tokens, "", "tokens: raw little-endian token file");
ABSL_FLAG(std::string, token_type, "u16", "tokens: u16 | i32");
ABSL_FLAG(int64_t, seq_len, 256, "tokens, text: tokens per sample (the model's context)");
ABSL_FLAG(std::vector<std::string>, text, {}, "text: text files, comma-separated, in order");
ABSL_FLAG(std::string, text_dir, "",
          "text: a directory of text files (all regular non-*.dat files, sorted), "
          "e.g. /usr/share/games/fortunes");
ABSL_FLAG(double, eval_fraction, 0.05, "text: the last fraction of windows -> eval set");
ABSL_FLAG(int64_t, num_records, 1024, "synthetic: number of records");
ABSL_FLAG(int64_t, record_bytes, 65536, "synthetic: feature bytes per record");
ABSL_FLAG(uint64_t, seed, 1, "synthetic: random seed");
ABSL_FLAG(std::string, out_dir, "", "existing output directory");
ABSL_FLAG(std::string, name, "data", "output file name prefix");
ABSL_FLAG(int64_t, records_per_shard, 100000, "records per shard file");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Converts data into tandem record shards.");
  absl::ParseCommandLine(argc, argv);
  tandem::convert::ShardOutput out;
  out.out_dir = absl::GetFlag(FLAGS_out_dir);
  out.name = absl::GetFlag(FLAGS_name);
  out.records_per_shard = absl::GetFlag(FLAGS_records_per_shard);
  if (out.out_dir.empty()) {
    std::fprintf(stderr, "convert: --out_dir is required\n");
    return 2;
  }
  const std::string mode = absl::GetFlag(FLAGS_mode);
  absl::StatusOr<tandem::convert::ConvertResult> result;
  if (mode == "idx") {
    result = tandem::convert::IdxToShards(absl::GetFlag(FLAGS_images),
                                          absl::GetFlag(FLAGS_labels), out);
  } else if (mode == "tokens") {
    const std::string t = absl::GetFlag(FLAGS_token_type);
    if (t != "u16" && t != "i32") {
      std::fprintf(stderr, "convert: --token_type must be u16 or i32, got %s\n",
                   t.c_str());
      return 2;
    }
    result = tandem::convert::TokensToShards(
        absl::GetFlag(FLAGS_tokens),
        t == "u16" ? tandem::convert::TokenType::kU16
                   : tandem::convert::TokenType::kI32,
        absl::GetFlag(FLAGS_seq_len), out);
  } else if (mode == "text") {
    std::vector<std::string> files = absl::GetFlag(FLAGS_text);
    const std::string dir = absl::GetFlag(FLAGS_text_dir);
    if (files.empty() == dir.empty()) {
      std::fprintf(stderr, "convert: --mode=text needs exactly one of --text or --text_dir\n");
      return 2;
    }
    if (!dir.empty()) {
      auto listed = tandem::convert::TextFilesIn(dir);
      if (!listed.ok()) {
        std::fprintf(stderr, "convert: %s\n", listed.status().ToString().c_str());
        return 1;
      }
      files = *listed;
    }
    tandem::convert::ShardOutput train = out, eval = out;
    train.out_dir = out.out_dir + "/train";
    eval.out_dir = out.out_dir + "/eval";
    for (const std::string& d : {train.out_dir, eval.out_dir}) {
      if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "convert: cannot create %s: %s\n", d.c_str(),
                     std::strerror(errno));
        return 1;
      }
    }
    tandem::convert::TextOptions topt;
    topt.seq_len = absl::GetFlag(FLAGS_seq_len);
    topt.eval_fraction = absl::GetFlag(FLAGS_eval_fraction);
    auto text = tandem::convert::TextToShards(files, topt, train, eval);
    if (!text.ok()) {
      std::fprintf(stderr, "convert: %s\n", text.status().ToString().c_str());
      return 1;
    }
    std::printf("read %ld bytes from %zu file(s); wrote %ld train records to %s and %ld "
                "eval records to %s (%ld-byte tail dropped)\n",
                text->bytes, files.size(), text->train.records, train.out_dir.c_str(),
                text->eval.records, eval.out_dir.c_str(), text->train.dropped_tokens);
    return 0;
  } else if (mode == "synthetic") {
    result = tandem::convert::SyntheticShards(
        absl::GetFlag(FLAGS_num_records), absl::GetFlag(FLAGS_record_bytes),
        absl::GetFlag(FLAGS_seed), out);
  } else {
    std::fprintf(stderr,
                 "convert: --mode must be idx, tokens, text or synthetic (got '%s')\n",
                 mode.c_str());
    return 2;
  }
  if (!result.ok()) {
    std::fprintf(stderr, "convert: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("wrote %ld records in %zu shard(s) to %s", result->records,
              result->files.size(), out.out_dir.c_str());
  if (result->dropped_tokens > 0) {
    std::printf(" (dropped a %ld-token tail)", result->dropped_tokens);
  }
  std::printf("\n");
  return 0;
}
