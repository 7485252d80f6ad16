#include "tests/gpt/text_batches.h"

#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/dataserver/batch_stream.h"
#include "services/dataserver/thread_pool.h"

namespace tandem {
namespace gpt_testing {

nn::Batch TokenBatch::view() const {
  nn::Batch b;
  b.size = static_cast<int>(sample_ids.size());
  b.tokens = tokens.data();
  b.labels = labels.data();
  return b;
}

absl::StatusOr<std::vector<TokenBatch>> DrawBatches(const data::Dataset& ds,
                                                    const v1::StreamBatchesRequest& request,
                                                    int64_t count) {
  const v1::DatasetInfo& info = ds.info();
  if (info.feature_spec().dtype() != v1::DTYPE_I32 || info.feature_spec().shape_size() != 1 ||
      info.label_spec().dtype() != v1::DTYPE_I32 ||
      info.label_spec().SerializeAsString() != info.feature_spec().SerializeAsString()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset ", info.name(), " is not i32 [ctx] tokens with i32 [ctx] labels"));
  }
  dataserver::ThreadPool pool(2);
  ASSIGN_OR_RETURN(auto stream, dataserver::BatchStream::Create(&ds, request, &pool, {}));
  std::vector<TokenBatch> out;
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(const v1::Batch* b, stream->Next());
    TokenBatch t;
    t.epoch = b->epoch();
    t.step_in_epoch = b->step_in_epoch();
    t.sample_ids.assign(b->sample_ids().begin(), b->sample_ids().end());
    // Copied (not cast in place): protobuf bytes carry no alignment promise.
    t.tokens.resize(b->features().data().size() / 4);
    t.labels.resize(b->labels().data().size() / 4);
    std::memcpy(t.tokens.data(), b->features().data().data(), t.tokens.size() * 4);
    std::memcpy(t.labels.data(), b->labels().data().data(), t.labels.size() * 4);
    out.push_back(std::move(t));
    stream->Release();
  }
  return out;
}

std::string WriteSyntheticText(const std::string& path, int64_t bytes, uint32_t seed) {
  static const char* const kWords[] = {
      "the",  "data",   "server", "streams", "batches", "of",   "text",  "to",
      "every", "worker", "and",   "each",    "rank",    "sums", "its",   "gradients",
      "a",    "model",  "learns", "bytes",   "one",     "step", "at",    "time"};
  std::mt19937 rng(seed);
  std::string text;
  while (static_cast<int64_t>(text.size()) < bytes) {
    const int words = 3 + static_cast<int>(rng() % 9);
    for (int w = 0; w < words; ++w) {
      if (w > 0) text += ' ';
      text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    }
    text += (rng() % 4 == 0) ? "?\n" : ".\n";
  }
  text.resize(bytes);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace gpt_testing
}  // namespace tandem
