// The shard server's summation speed against this machine's memcpy: W
// workers' pushes of every chunk of a 64 MiB range into a RangeStore (sum in
// place, fp32; the optimizer step excluded by a world the pushes never
// complete), in GB/s of pushed payload, next to memcpy of the same bytes.
//
//   bazel run //services/shardserver:range_store_bench
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {
namespace {

constexpr int64_t kN = int64_t{16} << 20;  // 64 MiB of fp32
constexpr int64_t kChunk = int64_t{1} << 20;

void BM_Memcpy(benchmark::State& state) {
  std::vector<float> a(kN, 1.f), b(kN, 0.f);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kN * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(state.iterations() * kN * int64_t{sizeof(float)});
}
BENCHMARK(BM_Memcpy)->UseRealTime();

// Rank 0's push starts each chunk (a copy), ranks 1..W-1 add into it. The
// world is W + 1, so the step never completes and every iteration sums.
void BM_PushSum(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  std::vector<float> g(kN, 0.5f);
  int64_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    RangeStore store;
    InitConfig c;
    c.generation = 1;
    c.range = {0, kN};
    c.chunk_elements = kChunk;
    c.world_size = workers + 1;
    c.optimizer.set_name("sgd");
    auto init = store.BeginInit(c).value();
    (void)init->Fill(0, g.data(), kN);
    (void)store.CommitInit(std::move(init));
    state.ResumeTiming();
    for (int r = 0; r < workers; ++r) {
      for (int64_t lo = 0; lo < kN; lo += kChunk) {
        PushHeader h;
        h.generation = 1;
        h.step = 1;
        h.lo = lo;
        h.hi = lo + kChunk;
        h.rank = r;
        h.learning_rate = 0.1;
        (void)store.Push(h, g.data() + lo, kChunk);
      }
    }
    bytes += workers * kN * int64_t{sizeof(float)};
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_PushSum)->Arg(2)->Arg(4)->UseRealTime();

}  // namespace
}  // namespace shardserver
}  // namespace tandem

BENCHMARK_MAIN();
