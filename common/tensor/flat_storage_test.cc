#include "common/tensor/flat_storage.h"

#include "common/kernels/cpu_backend.h"
#include "gtest/gtest.h"

namespace tandem {
namespace tensor {
namespace {

TEST(FlatStorageTest, ViewsPointIntoOneZeroedBufferPerKind) {
  kernels::CpuBackend backend;
  ParameterLayout layout;
  layout.Add("a", {3}, 0);
  layout.Add("b", {2, 4}, 1);
  absl::StatusOr<FlatStorage> s = FlatStorage::Create(&backend, layout);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->size(), layout.total_size());
  EXPECT_EQ(s->param(0), s->params());
  EXPECT_EQ(s->param(1), s->params() + 16);
  EXPECT_EQ(s->grad(1), s->grads() + 16);
  for (int64_t i = 0; i < s->size(); ++i) {
    EXPECT_EQ(s->params()[i], 0.f);
    EXPECT_EQ(s->grads()[i], 0.f);
  }
  // Moving keeps the views valid (the buffers move, not copy).
  float* p = s->params();
  FlatStorage moved = std::move(*s);
  EXPECT_EQ(moved.params(), p);
}

}  // namespace
}  // namespace tensor
}  // namespace tandem
