// Prints what tandem's two seeded generators produce, so
// tools/bench/tandem_order_test.py can check that tandem_order.py (which
// gpt_vs_pytorch.py --same_batches uses to feed PyTorch tandem's batches
// and initial weights) reproduces them exactly:
//
//   tandem_order_dump perm N SEED EPOCH     data::EpochPermutation, one line
//   tandem_order_dump normals SEED COUNT    nn::InitRng(SEED).Normal(0.02f)
//   tandem_order_dump gpt SPEC SEED         GptModel::Initialize(SEED): per
//                                           parameter "name size first last"
//
// Values are printed with %.9g (float32 round-trips). Bad arguments: a
// message on stderr and exit status 2.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/data/sampler.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/init.h"
#include "common/nn/model.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: tandem_order_dump perm N SEED EPOCH | normals SEED COUNT | "
               "gpt SPEC SEED\n");
  return 2;
}

bool ParseInt(const char* s, int64_t* out) {
  char* end = nullptr;
  *out = std::strtoll(s, &end, 10);
  return end != s && *end == '\0' && *out >= 0;
}

int Gpt(const std::string& text, uint64_t seed) {
  if (text.rfind("gpt:", 0) != 0) {
    std::fprintf(stderr, "tandem_order_dump: need a gpt: spec, got %s\n", text.c_str());
    return 2;
  }
  tandem::kernels::CpuBackend backend(tandem::kernels::BackendOptions{});
  tandem::nn::ModelOptions mo;
  mo.max_batch = 1;
  mo.seed = seed;
  auto model = tandem::nn::CreateModel(text, &backend, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "tandem_order_dump: %s\n", std::string(model.status().message()).c_str());
    return 2;
  }
  const float* params = (*model)->storage().params();
  for (const tandem::tensor::ParameterInfo& p : (*model)->layout().params()) {
    std::printf("%s %lld %.9g %.9g\n", p.name.c_str(), static_cast<long long>(p.size),
                params[p.offset], params[p.offset + p.size - 1]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string cmd = argv[1];
  int64_t a = 0, b = 0, c = 0;
  if (cmd == "perm" && argc == 5 && ParseInt(argv[2], &a) && ParseInt(argv[3], &b) &&
      ParseInt(argv[4], &c)) {
    std::vector<int64_t> perm;
    tandem::data::EpochPermutation(a, static_cast<uint64_t>(b), c, /*shuffle=*/true, &perm);
    for (size_t i = 0; i < perm.size(); ++i) {
      std::printf("%s%lld", i ? " " : "", static_cast<long long>(perm[i]));
    }
    std::printf("\n");
    return 0;
  }
  if (cmd == "normals" && argc == 4 && ParseInt(argv[2], &a) && ParseInt(argv[3], &b)) {
    tandem::nn::InitRng rng(static_cast<uint64_t>(a));
    for (int64_t i = 0; i < b; ++i) std::printf("%.9g\n", rng.Normal(0.02f));
    return 0;
  }
  if (cmd == "gpt" && argc == 4 && ParseInt(argv[3], &a)) {
    return Gpt(argv[2], static_cast<uint64_t>(a));
  }
  return Usage();
}
