// One forward and backward of tandem's GPT (CPU backend) on given token
// windows, for comparing it with PyTorch's on the same weights and batch
// (tools/bench/gpt_grad_compare.py, gpt_grad_compare_test.py):
//
//   gpt_step_dump SPEC SEED TOKENS PARAMS GRADS_OUT
//
// TOKENS: raw int32 windows [batch, context + 1] (features are a window's
// first `context` tokens, labels its last, as tandem's text datasets cut
// them). PARAMS: raw float32, the model's whole flat parameter vector in
// its layout (offsets as printed), or "-" for GptModel::Initialize(SEED).
// Prints "param NAME OFFSET SIZE" per parameter, "total N" (the vector's
// length, alignment padding included), then "loss L" (%.9g);
// writes the flat gradient vector (float32, the same layout) to GRADS_OUT.
// Bad arguments or files: a message on stderr and exit status 2.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"

namespace {

bool ReadFile(const std::string& path, std::vector<char>* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "gpt_step_dump: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    return Fail("usage: gpt_step_dump SPEC SEED TOKENS PARAMS|- GRADS_OUT");
  }
  const std::string spec = argv[1];
  if (spec.rfind("gpt:", 0) != 0) return Fail("need a gpt: spec, got " + spec);
  std::vector<char> tokens, params;
  if (!ReadFile(argv[3], &tokens)) return Fail(std::string("cannot read ") + argv[3]);
  if (std::string(argv[4]) != "-" && !ReadFile(argv[4], &params)) {
    return Fail(std::string("cannot read ") + argv[4]);
  }
  tandem::kernels::CpuBackend backend(tandem::kernels::BackendOptions{});
  tandem::nn::ModelOptions mo;
  mo.seed = std::strtoull(argv[2], nullptr, 10);
  mo.max_batch = 1;
  auto probe = tandem::nn::CreateModel(spec, &backend, mo);
  if (!probe.ok()) return Fail(std::string(probe.status().message()));
  const int ctx = (*probe)->rows_per_sample();
  const size_t window_bytes = static_cast<size_t>(ctx + 1) * sizeof(int32_t);
  if (tokens.empty() || tokens.size() % window_bytes != 0) {
    return Fail("TOKENS must hold whole int32 windows of context + 1 = " +
                std::to_string(ctx + 1) + " tokens");
  }
  const int batch = static_cast<int>(tokens.size() / window_bytes);
  mo.max_batch = batch;
  auto model = tandem::nn::CreateModel(spec, &backend, mo);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  tandem::nn::Model& m = **model;
  const size_t n = static_cast<size_t>(m.storage().size());
  if (!params.empty()) {
    if (params.size() != n * sizeof(float)) {
      return Fail("PARAMS has " + std::to_string(params.size()) + " bytes; the model's vector is " +
                  std::to_string(n * sizeof(float)));
    }
    std::copy(params.begin(), params.end(), reinterpret_cast<char*>(m.storage().params()));
  }
  const int32_t* w = reinterpret_cast<const int32_t*>(tokens.data());
  std::vector<int32_t> x(static_cast<size_t>(batch) * ctx), y(x.size());
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < ctx; ++t) {
      x[b * ctx + t] = w[b * (ctx + 1) + t];
      y[b * ctx + t] = w[b * (ctx + 1) + t + 1];
    }
  }
  tandem::nn::Batch in;
  in.size = batch;
  in.tokens = x.data();
  in.labels = y.data();
  absl::Status s = m.Forward(in);
  if (s.ok()) s = m.Backward(0.f, nullptr);
  if (!s.ok()) return Fail(std::string(s.message()));
  for (const tandem::tensor::ParameterInfo& p : m.layout().params()) {
    std::printf("param %s %lld %lld\n", p.name.c_str(), static_cast<long long>(p.offset),
                static_cast<long long>(p.size));
  }
  std::printf("total %zu\nloss %.9g\n", n, *m.loss());
  std::ofstream out(argv[5], std::ios::binary);
  out.write(reinterpret_cast<const char*>(m.storage().grads()), n * sizeof(float));
  if (!out) return Fail(std::string("cannot write ") + argv[5]);
  return 0;
}
