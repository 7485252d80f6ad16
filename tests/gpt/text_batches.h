// Test helpers for GPT training on converted text: one rank's batches drawn
// through the data server's BatchStream (the same sampler, slicing and
// packing a worker receives over gRPC) and copied into host token / label
// arrays an nn::Batch can point at (CPU backend: host = device memory).
//
//   ASSIGN_OR_RETURN(auto ds, data::OpenDataset("t", shard_dir));
//   ASSIGN_OR_RETURN(std::vector<TokenBatch> b, DrawBatches(*ds, request, 5));
//   model->Forward(b[0].view());
//
// Thread-compatible; DrawBatches fails with the stream's Status, or
// INVALID_ARGUMENT if the dataset is not i32 [ctx] tokens + i32 [ctx] labels.
#ifndef TANDEM_TESTS_GPT_TEXT_BATCHES_H_
#define TANDEM_TESTS_GPT_TEXT_BATCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/nn/model.h"
#include "proto/dataserver.pb.h"
#include "common/data/dataset.h"

namespace tandem {
namespace gpt_testing {

struct TokenBatch {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  std::vector<int64_t> sample_ids;  // n
  std::vector<int32_t> tokens;      // [n, ctx]
  std::vector<int32_t> labels;      // [n, ctx]
  nn::Batch view() const;
};

// The first `count` batches of `request` (dataset name ignored: `ds`).
absl::StatusOr<std::vector<TokenBatch>> DrawBatches(const data::Dataset& ds,
                                                    const v1::StreamBatchesRequest& request,
                                                    int64_t count);

// `bytes` bytes of deterministic English-like text (words drawn from a small
// vocabulary with a fixed seed, lines and punctuation), written to `path`.
std::string WriteSyntheticText(const std::string& path, int64_t bytes, uint32_t seed);

}  // namespace gpt_testing
}  // namespace tandem

#endif  // TANDEM_TESTS_GPT_TEXT_BATCHES_H_
