// Embedding: token + learned position embeddings,
// out[b, t] = token[ids[b, t]] + position[t], for ids [batch, seq] with
// seq <= context. Backward scatter-adds into the token table's gradient.
// Token ids must lie in [0, vocab): they are device data the layer cannot
// check cheaply, so the data path validates them (the CPU backend would read
// out of bounds). See layer.h for the life cycle, ownership and errors.
#ifndef TANDEM_COMMON_NN_EMBEDDING_H_
#define TANDEM_COMMON_NN_EMBEDDING_H_

#include <string>

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/nn/layer.h"
#include "common/tensor/flat_storage.h"
#include "common/tensor/parameter_layout.h"

namespace tandem {
namespace nn {

class Embedding {
 public:
  Embedding(int vocab, int context, int width)
      : vocab_(vocab), context_(context), width_(width) {}
  Embedding(const Embedding&) = delete;
  Embedding& operator=(const Embedding&) = delete;

  // Parameters: "<prefix>.token" [vocab, width], "<prefix>.position"
  // [context, width].
  void AddParams(const std::string& prefix, int group,
                 tensor::ParameterLayout* layout);
  absl::Status Init(kernels::Backend* backend,
                    const tensor::FlatStorage& storage, int max_batch);
  // ids [batch, seq] -> output() [batch, seq, width].
  absl::Status Forward(const int32_t* ids, int batch, int seq);
  absl::Status Backward(const float* dy, float grad_beta);
  float* output() const { return y_.f32(); }
  int token_index() const { return token_; }
  int position_index() const { return position_; }

 private:
  int vocab_, context_, width_;
  int token_ = -1, position_ = -1;
  kernels::Backend* backend_ = nullptr;
  float *tok_ = nullptr, *pos_ = nullptr, *dtok_ = nullptr, *dpos_ = nullptr;
  int max_batch_ = 0, batch_ = 0, seq_ = 0;
  const int32_t* ids_ = nullptr;
  kernels::DeviceBuffer y_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_EMBEDDING_H_
