// Shared pieces of tandem's layers (common/nn).
//
// Every layer follows one life cycle, so models can compose them without a
// graph engine:
//   1. construct with its sizes;
//   2. AddParams(prefix, group, &layout) appends its parameters to the
//      model's ParameterLayout (models add layers in backward order);
//   3. Init(backend, storage, max_rows) takes views of its parameters and
//      gradients from the FlatStorage and allocates its activation buffers
//      once, for at most max_rows rows;
//   4. Forward(...) / Backward(...) any number of times; nothing allocates.
// Forward keeps pointers to its inputs for Backward, so the caller keeps
// them alive and unchanged until Backward has run. Backward takes
// `grad_beta`: 0 overwrites parameter gradients, 1 accumulates into them
// (micro-batches). Calls return InvalidArgument for shapes outside what
// Init allowed; nothing aborts. Layers are thread-compatible and hold raw
// pointers into the Backend and FlatStorage, which must outlive them.
#ifndef TANDEM_COMMON_NN_LAYER_H_
#define TANDEM_COMMON_NN_LAYER_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace nn {

// A range of the flat gradient vector whose values are final for this
// backward pass: parameters [first_param, end_param) of the layout, elements
// [lo, hi). Reported in backward order, so lo only grows.
struct GradRange {
  int group = 0;
  int first_param = 0;
  int end_param = 0;
  int64_t lo = 0;
  int64_t hi = 0;
};

// Called from Backward() on the calling thread as each layer finishes; the
// gradient-sync engine starts bucket collectives from here. Work queued on
// the backend before the call (CUDA) is not necessarily complete: the callee
// orders itself after it (e.g. an event on the backend's stream).
using GradReadyCallback = std::function<void(const GradRange&)>;

// InvalidArgument unless 0 < rows <= max_rows.
inline absl::Status CheckRows(const char* layer, int rows, int max_rows) {
  if (rows <= 0 || rows > max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        layer, ": ", rows, " rows, but the layer was sized for 1..", max_rows,
        " (raise max_batch when building the model)"));
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_LAYER_H_
