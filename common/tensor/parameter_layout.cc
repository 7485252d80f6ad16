#include "common/tensor/parameter_layout.h"

#include <cassert>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace tensor {

int ParameterLayout::Add(const std::string& name, std::vector<int64_t> shape,
                         int group) {
  ParameterInfo info;
  info.name = name;
  info.size = 1;
  for (int64_t d : shape) {
    assert(d > 0);
    info.size *= d;
  }
  info.shape = std::move(shape);
  info.group = group;
  info.offset = (total_size_ + kAlignElems - 1) / kAlignElems * kAlignElems;
  total_size_ = info.offset + info.size;
  params_.push_back(std::move(info));
  return static_cast<int>(params_.size()) - 1;
}

int64_t ParameterLayout::num_elements() const {
  int64_t n = 0;
  for (const ParameterInfo& p : params_) n += p.size;
  return n;
}

absl::StatusOr<int> ParameterLayout::Find(const std::string& name) const {
  for (int i = 0; i < num_params(); ++i) {
    if (params_[i].name == name) return i;
  }
  return absl::NotFoundError(
      absl::StrCat("no parameter named \"", name, "\" in this model"));
}

absl::Status ParameterLayout::CheckSameAs(const ParameterLayout& other) const {
  if (num_params() != other.num_params()) {
    return absl::FailedPreconditionError(
        absl::StrCat("parameter layouts differ: ", num_params(), " vs ",
                     other.num_params(), " parameters"));
  }
  for (int i = 0; i < num_params(); ++i) {
    const ParameterInfo& a = params_[i];
    const ParameterInfo& b = other.params_[i];
    if (a.name != b.name || a.shape != b.shape || a.offset != b.offset) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parameter layouts differ at #", i, ": ", a.name, " [",
          absl::StrJoin(a.shape, ", "), "] @", a.offset, " vs ", b.name, " [",
          absl::StrJoin(b.shape, ", "), "] @", b.offset));
    }
  }
  return absl::OkStatus();
}

uint64_t ParameterLayout::Fingerprint() const {
  // FNV-1a over a canonical text form: stable across runs and platforms.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  for (const ParameterInfo& p : params_) {
    mix(absl::StrCat(p.name, "[", absl::StrJoin(p.shape, ","), "]@", p.offset,
                     ";"));
  }
  return h;
}

std::string ParameterLayout::DebugString() const {
  std::string out;
  for (const ParameterInfo& p : params_) {
    absl::StrAppend(&out, p.name, " [", absl::StrJoin(p.shape, ", "), "] @",
                    p.offset, "\n");
  }
  return out;
}

}  // namespace tensor
}  // namespace tandem
