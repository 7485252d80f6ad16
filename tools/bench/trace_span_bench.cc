// The cost of one trace::Span (common/trace/trace.h) with --trace off (no
// recorder installed: one load and one branch) and on (two clock reads and
// one slot of the lock-free ring), and of the whole Snapshot a trace write
// takes. Run: bazel run -c opt //tools/bench:trace_span_bench
#include "benchmark/benchmark.h"
#include "common/trace/recorder.h"
#include "common/trace/trace.h"

namespace tandem {
namespace trace {
namespace {

void BM_SpanOff(benchmark::State& state) {
  Install(nullptr);
  for (auto _ : state) {
    Span s("forward", "compute", 4096, 1);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_SpanOff);

void BM_SpanOn(benchmark::State& state) {
  Recorder r(RecorderOptions{});
  Install(&r);
  for (auto _ : state) {
    Span s("forward", "compute", 4096, 1);
    benchmark::ClobberMemory();
  }
  Install(nullptr);
}
BENCHMARK(BM_SpanOn)->Threads(1)->Threads(2);

void BM_Snapshot(benchmark::State& state) {
  Recorder r(RecorderOptions{});
  for (int64_t i = 0; i < r.capacity(); ++i) r.Complete("x", "y", i, 1);
  for (auto _ : state) benchmark::DoNotOptimize(r.Snapshot());
  state.SetItemsProcessed(state.iterations() * r.capacity());
}
BENCHMARK(BM_Snapshot);

}  // namespace
}  // namespace trace
}  // namespace tandem

BENCHMARK_MAIN();
