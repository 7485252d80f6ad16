// LayerGroups: zero3's gather units. Consecutive layers of the model's
// parameter hook ranges (forward order) share one gather collective until
// the group holds at least `min_floats` parameters, so a model of many
// small layers does not pay one collective (its hand-offs, the owners'
// uneven pieces) per layer. A group is one contiguous range of the flat
// vector: a layer joins the open group only when its range touches the
// group's (either end: models may lay layers out in forward or in backward
// order); otherwise it starts a new group. A last group smaller than `min_floats` joins the one
// before it (when contiguous), so every group but at most the last holds
// >= min_floats floats. min_floats <= 0: every layer its own group.
//
//   LayerGroups g = GroupLayers(model->param_hook_ranges(), 1 << 20);
//   int k = g.group_of_layer[i];  // [g.groups[k].lo, g.groups[k].hi)
//
// Pure function; the result is immutable data (thread-compatible).
#ifndef TANDEM_COMMON_SYNC_ZERO_LAYER_GROUPS_H_
#define TANDEM_COMMON_SYNC_ZERO_LAYER_GROUPS_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace tandem {
namespace sync {

struct LayerGroup {
  int64_t lo = 0;  // [lo, hi) of the flat parameter vector
  int64_t hi = 0;
  int first = 0;   // its layers: first..last in forward order
  int last = 0;
};

struct LayerGroups {
  std::vector<LayerGroup> groups;   // forward order
  std::vector<int> group_of_layer;  // per layer
  std::vector<std::pair<int64_t, int64_t>> ranges() const;
};

LayerGroups GroupLayers(const std::vector<std::pair<int64_t, int64_t>>& layers,
                        int64_t min_floats);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_LAYER_GROUPS_H_
