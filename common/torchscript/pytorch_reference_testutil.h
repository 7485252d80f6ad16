// Test-only: reading what testdata/pytorch_loop.py wrote (every parameter,
// named_parameters order, float32, and the names in OUT.names) into a
// model's flat layout, and the relative L2 distance tests compare with.
//
//   std::vector<float> ref = ReadPyTorchParams(out, model.layout());
//   EXPECT_LE(RelativeDistance(ours, ref), 1e-5);
//
// Thread-safe (pure functions). A name the layout lacks or a short file is a
// gtest failure and an empty vector.
#ifndef TANDEM_COMMON_TORCHSCRIPT_PYTORCH_REFERENCE_TESTUTIL_H_
#define TANDEM_COMMON_TORCHSCRIPT_PYTORCH_REFERENCE_TESTUTIL_H_

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/tensor/parameter_layout.h"
#include "gtest/gtest.h"

namespace tandem {
namespace torchscript_testing {

inline std::vector<float> ReadPyTorchParams(const std::string& out,
                                            const tensor::ParameterLayout& layout) {
  std::ifstream names(out + ".names");
  std::ifstream values(out, std::ios::binary);
  std::vector<float> flat(layout.total_size(), 0.f);
  std::string name;
  while (std::getline(names, name)) {
    auto index = layout.Find(name);
    EXPECT_TRUE(index.ok()) << name;
    if (!index.ok()) return {};
    const tensor::ParameterInfo& p = layout.param(*index);
    values.read(reinterpret_cast<char*>(flat.data() + p.offset),
                static_cast<std::streamsize>(p.size * sizeof(float)));
    EXPECT_TRUE(values.good()) << out << " ends before " << name;
    if (!values.good()) return {};
  }
  return flat;
}

// |a - b| / |b| (L2).
inline double RelativeDistance(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    n += double{b[i]} * b[i];
  }
  return std::sqrt(d / std::max(n, 1e-30));
}

}  // namespace torchscript_testing
}  // namespace tandem

#endif  // TANDEM_COMMON_TORCHSCRIPT_PYTORCH_REFERENCE_TESTUTIL_H_
