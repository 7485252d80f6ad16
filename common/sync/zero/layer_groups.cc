#include "common/sync/zero/layer_groups.h"

#include <algorithm>
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
  // Layers touch when one ends where the other starts (models lay their
  // layers out in forward or in backward order).
  auto touch = [](const LayerGroup& g, int64_t lo, int64_t hi) { return g.hi == lo || hi == g.lo; };
  auto extend = [](LayerGroup& g, int64_t lo, int64_t hi) {
    g.lo = std::min(g.lo, lo);
    g.hi = std::max(g.hi, hi);
  };
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& [lo, hi] = layers[i];
    const int layer = static_cast<int>(i);
    LayerGroup* open = out.groups.empty() ? nullptr : &out.groups.back();
    if (open != nullptr && min_floats > 0 && touch(*open, lo, hi) &&
        open->hi - open->lo < min_floats) {
      extend(*open, lo, hi);
      open->last = layer;
    } else {
      out.groups.push_back(LayerGroup{lo, hi, layer, layer});
    }
    out.group_of_layer[i] = static_cast<int>(out.groups.size()) - 1;
  }
  // A short last group joins the one before it when they touch.
  const std::size_t g = out.groups.size();
  if (min_floats > 0 && g >= 2) {
    const LayerGroup tail = out.groups[g - 1];
    LayerGroup& prev = out.groups[g - 2];
    if (tail.hi - tail.lo < min_floats && touch(prev, tail.lo, tail.hi)) {
      extend(prev, tail.lo, tail.hi);
      prev.last = tail.last;
      for (int i = tail.first; i <= tail.last; ++i) out.group_of_layer[i] = static_cast<int>(g) - 2;
      out.groups.pop_back();
    }
  }
  return out;
}

}  // namespace sync
}  // namespace tandem
