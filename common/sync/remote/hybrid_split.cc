#include "common/sync/remote/hybrid_split.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem {
namespace sync {

double AutoRingShare(int nodes, int servers) {
  if (nodes < 2 || servers < 1 || servers >= nodes) return 0;
  const double ring = 2.0 * (nodes - 1) / nodes;  // a node link's bytes per ring byte
  const double fan_in = static_cast<double>(nodes) / servers;  // a server link's per push byte
  return (fan_in - 1) / (ring + fan_in - 1);
}

std::string DefaultRingShare(int servers, bool replicate, bool int8_pushes) {
  if (int8_pushes) return "0";
  return servers < 2 || !replicate ? "auto" : "0";
}

absl::StatusOr<RingSplit> ChooseRingSplit(const RingSplitInputs& in) {
  RingSplit out;
  const bool automatic = in.spec == "auto";
  if (automatic) {
    out.share = AutoRingShare(in.nodes, in.servers);
  } else if (!absl::SimpleAtod(in.spec, &out.share) || !(out.share >= 0) || !(out.share < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync_opt ring_share must be auto or a share of the vector in [0, 1) sent by a "
        "cross-node ring instead of the shard servers, got '", in.spec, "'"));
  }
  const int64_t unit = std::max<int64_t>(1, in.unit);
  const int64_t units = in.size / unit;
  const int64_t ring_units =
      std::min<int64_t>(std::llround(out.share * static_cast<double>(in.size) / unit),
                        std::max<int64_t>(0, units - 1));
  out.ring_size = std::max<int64_t>(0, ring_units) * unit;
  const std::string how =
      automatic
          ? (out.share == 0
                 ? absl::StrFormat("ring_share=auto: f = 0 (%d nodes, %d shard servers: %s)",
                                   in.nodes, in.servers,
                                   in.nodes < 2 ? "one node, no cross-node ring"
                                                : "the servers' links are no busier than the "
                                                  "nodes', everything through the servers")
                 : absl::StrFormat(
                       "ring_share=auto: f = %.3f from %d nodes and %d shard servers at equal link "
                       "rates (per direction a node link carries %.2f f + (1 - f) of the model, "
                       "a server link %.2f (1 - f): equal at this f)",
                       out.share, in.nodes, in.servers, 2.0 * (in.nodes - 1) / in.nodes,
                       static_cast<double>(in.nodes) / in.servers))
          : absl::StrFormat("ring_share=%s: f = %.3f as given", in.spec, out.share);
  out.why = absl::StrFormat(
      "%s; rounded to whole groups of %d values: %d of %d values (%.1f%%) by a ring among the "
      "nodes, the rest through the servers",
      how, unit, out.ring_size, in.size,
      in.size > 0 ? 100.0 * static_cast<double>(out.ring_size) / in.size : 0.0);
  return out;
}

}  // namespace sync
}  // namespace tandem
