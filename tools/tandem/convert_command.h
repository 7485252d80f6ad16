// `tandem convert`: turns the user's data into one servable tandem dataset
// (a directory of record shards whose description carries the samples'
// dtype and shape). The standalone tools/convert binary runs the same
// command.
//
//   tandem convert --mode=npy --features=X.npy --labels=Y.npy
//                  [--eval_features=Xt.npy --eval_labels=Yt.npy] --out_dir=DIR
//     -> DIR/train (and DIR/eval); tandem local --dataset=DIR trains on it
//   tandem convert --mode=text --text_dir=/usr/share/games/fortunes --out_dir=DIR
//   tandem convert --mode=idx --images=I.gz --labels=L.gz --out_dir=DIR
//   tandem convert --mode=tokens --tokens=corpus.u16 --seq_len=256 --out_dir=DIR
//   tandem convert --mode=synthetic --num_records=4096 --out_dir=DIR
//
// Nothing is written unless the whole conversion succeeds: the output is
// built in a temporary sibling of --out_dir and renamed into place, and
// --out_dir must not exist or be empty. Exit status (RunConvertCommand):
// 0 done, 2 bad flags or bad input (a missing or malformed file, a flag of
// another mode; the message names the file and the problem), 1 a failure
// writing the output. Thread-compatible.
#ifndef TANDEM_TOOLS_TANDEM_CONVERT_COMMAND_H_
#define TANDEM_TOOLS_TANDEM_CONVERT_COMMAND_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/tandem/flag_table.h"

namespace tandem {
namespace cli {

struct ConvertCliOptions {
  std::string mode;               // npy | idx | tokens | text | synthetic
  std::string out_dir;            // new or empty; required
  std::string name = "data";      // shard file name prefix
  int64_t records_per_shard = 100000;
  // npy: features (N, ...) and labels (N,); eval pair optional. idx:
  // --images and --labels (gzipped IDX).
  std::string features, labels, eval_features, eval_labels, images;
  // tokens / text
  std::string tokens;
  std::string token_type = "u16";
  int64_t seq_len = 256;
  std::vector<std::string> text;
  std::string text_dir;
  double eval_fraction = 0.05;
  // synthetic
  int64_t num_records = 1024;
  int64_t record_bytes = 65536;
  int64_t seed = 1;
  // Flags the command line named (canonical names): a flag of another mode
  // is refused.
  std::vector<std::string> given;
};

FlagTable ConvertFlags(ConvertCliOptions* o);

// Converts; returns the summary line(s) to print. INVALID_ARGUMENT /
// NOT_FOUND / DATA_LOSS / ALREADY_EXISTS: bad flags or input, nothing
// written; anything else: the output could not be written.
absl::StatusOr<std::string> RunConvert(const ConvertCliOptions& o);

// RunConvert with its summary on `out` and "tandem convert: <error>" on
// `err`; returns the exit status (see the file comment).
int RunConvertCommand(const ConvertCliOptions& o, std::FILE* out, std::FILE* err);

// The whole command for `args` (the words after the command): parse,
// --help, run. For programs that are only this command (tools/convert).
int ConvertMain(const std::vector<std::string>& args);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_CONVERT_COMMAND_H_
