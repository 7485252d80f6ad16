// NumPy arrays -> one servable tandem dataset: `tandem convert --mode=npy`.
//
//   NpySources src;
//   src.train = {"X.npy", "Y.npy"};
//   src.eval = {"Xt.npy", "Yt.npy"};            // optional
//   ASSIGN_OR_RETURN(NpyResult r, NpyToShards(src, {.out_dir = "/data/mine"}));
//   // /data/mine/train/*.tshard and /data/mine/eval/*.tshard
//
// Features: a .npy array of shape (N, *sample_shape) — float32, uint8,
// int32 or int64, at most 7 sample dimensions; labels: a 1-D int32 or int64
// array of N class indices >= 0. Each sample becomes one record (its feature
// bytes as stored, then its label as int32); the dataset's description
// carries the feature dtype and sample shape, labels i32 [] and
// num_classes = the largest label (train or eval) + 1.
//
// Every array is read and checked before a byte is written. Errors name the
// file and the problem: NOT_FOUND (no such file), INVALID_ARGUMENT (not a
// .npy, unsupported dtype, Fortran order, a label count that does not match
// the features, negative labels, eval samples shaped unlike train's),
// DATA_LOSS (a truncated file); the writer's error otherwise.
// Thread-compatible (pure functions over the file system).
#ifndef TANDEM_TOOLS_CONVERT_NPY_CONVERT_H_
#define TANDEM_TOOLS_CONVERT_NPY_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/convert/convert.h"

namespace tandem {
namespace convert {

struct NpyPair {
  std::string features;  // path of the (N, ...) features array
  std::string labels;    // path of the (N,) labels array
};

struct NpySources {
  NpyPair train;  // both required
  NpyPair eval;   // both or neither
};

struct NpyResult {
  ConvertResult train;  // in <out_dir>/train
  ConvertResult eval;   // in <out_dir>/eval; no files when there is no eval pair
  v1::DatasetInfo info; // the description both carry (num_samples of train)
};

// Writes <out.out_dir>/train (and /eval), creating them; out.out_dir must
// exist.
absl::StatusOr<NpyResult> NpyToShards(const NpySources& sources, const ShardOutput& out);

}  // namespace convert
}  // namespace tandem

#endif  // TANDEM_TOOLS_CONVERT_NPY_CONVERT_H_
