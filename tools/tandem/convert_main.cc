// convert: writes tandem record-shard datasets. The same command, flags and
// exit status as `tandem convert` (tools/tandem/convert_command.h); run
// `convert --help` for the flags of every mode.
//
//   convert --mode=npy --features=X.npy --labels=Y.npy --out_dir=/data/mine
//   convert --mode=text --text_dir=/usr/share/games/fortunes --out_dir=/data/fortunes
#include <string>
#include <vector>

#include "tools/tandem/convert_command.h"

int main(int argc, char** argv) {
  return tandem::cli::ConvertMain(std::vector<std::string>(argv + 1, argv + argc));
}
