#include "common/sync/zero/layer_groups.h"

#include <cstddef>

namespace tandem {
namespace sync {

std::vector<std::pair<int64_t, int64_t>> LayerGroups::ranges() const {
  std::vector<std::pair<int64_t, int64_t>> r;
  r.reserve(groups.size());
  for (const LayerGroup& g : groups) r.push_back({g.lo, g.hi});
  return r;
}

LayerGroups GroupLayers(const std::vector<std::pair<int64_t, int64_t>>& layers,
                        int64_t min_floats) {
  LayerGroups out;
  out.group_of_layer.resize(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& [lo, hi] = layers[i];
    const int layer = static_cast<int>(i);
    LayerGroup* open = out.groups.empty() ? nullptr : &out.groups.back();
    const bool joins = open != nullptr && min_floats > 0 && open->hi == lo &&
                       open->hi - open->lo < min_floats;
    if (joins) {
      open->hi = hi;
      open->last = layer;
    } else {
      out.groups.push_back(LayerGroup{lo, hi, layer, layer});
    }
    out.group_of_layer[i] = static_cast<int>(out.groups.size()) - 1;
  }
  // A short last group joins the one before it when they touch.
  const std::size_t g = out.groups.size();
  if (min_floats > 0 && g >= 2) {
    LayerGroup& tail = out.groups[g - 1];
    LayerGroup& prev = out.groups[g - 2];
    if (tail.hi - tail.lo < min_floats && prev.hi == tail.lo) {
      prev.hi = tail.hi;
      prev.last = tail.last;
      for (int i = tail.first; i <= tail.last; ++i) out.group_of_layer[i] = static_cast<int>(g) - 2;
      out.groups.pop_back();
    }
  }
  return out;
}

}  // namespace sync
}  // namespace tandem
