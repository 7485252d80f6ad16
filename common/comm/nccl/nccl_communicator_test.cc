// One-rank NCCL collectives on device buffers (NCCL refuses two ranks on one
// GPU; multi-rank logic is covered through Gloo). Skips without a device.
#include "common/comm/nccl/nccl_communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    int devices_ = 0;                                                          \
    if (cudaGetDeviceCount(&devices_) != cudaSuccess || devices_ == 0) {       \
      GTEST_SKIP() << "no CUDA device";                                        \
    }                                                                          \
  } while (0)

// An in-memory KV: what the coordinator's store is in production.
class MemoryKv {
 public:
  NcclKv Functions() {
    NcclKv kv;
    kv.put = [this](const std::string& k, const std::string& v) {
      std::lock_guard<std::mutex> lock(mu_);
      values_[k] = v;
      return absl::OkStatus();
    };
    kv.get = [this](const std::string& k, absl::Duration) -> absl::StatusOr<std::string> {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = values_.find(k);
      if (it == values_.end()) return absl::NotFoundError(k);
      return it->second;
    };
    return kv;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.size();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> values_;
};

// A device vector whose host transfers are complete on return. A plain
// cudaMemcpy runs on the legacy stream, which does not order against the
// communicator's (or any) non-blocking stream, and a pageable host-to-device
// cudaMemcpy may return before its DMA lands: so every transfer synchronises
// the whole device on both sides.
struct DeviceVector {
  explicit DeviceVector(size_t n) : n(n) { EXPECT_EQ(cudaMalloc(&ptr, n * 4 + 4), cudaSuccess); }
  ~DeviceVector() { cudaFree(ptr); }
  void Set(const std::vector<float>& v) {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ptr, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<float> Get() {
    std::vector<float> v(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), ptr, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return v;
  }
  float* ptr = nullptr;
  size_t n;
};

TEST(NcclCommunicator, OneRankCollectives) {
  SKIP_WITHOUT_GPU();
  MemoryKv store;
  NcclOptions o;
  o.kv = store.Functions();
  o.prefix = "test";
  o.timeout = absl::Seconds(60);
  auto comm = NcclCommunicator::Create(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  NcclCommunicator& c = **comm;
  EXPECT_EQ(store.size(), 1u);  // rank 0 published the unique id
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.world_size(), 1);
  EXPECT_EQ(c.backend(), "nccl");

  const size_t n = 1 << 20;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) - 500.f;

  DeviceVector a(n), b(n);
  a.Set(host);
  ASSERT_TRUE(c.AllReduce(a.ptr, n, ReduceOp::kSum).ok());
  EXPECT_EQ(a.Get(), host);  // one rank: the sum is the input
  ASSERT_TRUE(c.AllReduce(a.ptr, n, ReduceOp::kMax).ok());
  EXPECT_EQ(a.Get(), host);

  ASSERT_TRUE(c.ReduceScatter(a.ptr, b.ptr, n).ok());
  EXPECT_EQ(b.Get(), host);

  DeviceVector g(n);
  ASSERT_TRUE(c.AllGather(a.ptr, g.ptr, n * sizeof(float)).ok());
  EXPECT_EQ(g.Get(), host);

  ASSERT_TRUE(c.Broadcast(a.ptr, n * sizeof(float), 0).ok());
  EXPECT_EQ(a.Get(), host);
  EXPECT_EQ(c.Broadcast(a.ptr, 4, 1).code(), absl::StatusCode::kInvalidArgument);

  DeviceVector t(n);
  ASSERT_TRUE(c.AllToAll(a.ptr, t.ptr, n * sizeof(float)).ok());
  EXPECT_EQ(t.Get(), host);

  EXPECT_TRUE(c.Barrier().ok());
  EXPECT_TRUE(c.AllReduce(a.ptr, 0).ok());
}

TEST(NcclCommunicator, AbortFailsTheNextCollectiveWithTheReason) {
  SKIP_WITHOUT_GPU();
  MemoryKv store;
  NcclOptions o;
  o.kv = store.Functions();
  o.prefix = "abort";
  o.timeout = absl::Seconds(60);
  auto comm = NcclCommunicator::Create(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  NcclCommunicator& c = **comm;
  DeviceVector a(16);
  a.Set(std::vector<float>(16, 1.f));
  ASSERT_TRUE(c.AllReduce(a.ptr, 16, ReduceOp::kSum).ok());
  c.Abort("generation 3 ended: rank 1 missed 3 heartbeats");  // e.g. the heartbeat thread
  const absl::Status s = c.AllReduce(a.ptr, 16, ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_NE(s.message().find("rank 1 missed 3 heartbeats"), std::string::npos) << s;
  EXPECT_EQ(c.Barrier().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NcclCommunicator, WaitsForTheComputeStream) {
  SKIP_WITHOUT_GPU();
  cudaStream_t compute;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  MemoryKv store;
  NcclOptions o;
  o.kv = store.Functions();
  o.wait_stream = compute;
  auto comm = NcclCommunicator::Create(o);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const size_t n = 1 << 22;
  std::vector<float> ones(n, 1.f), twos(n, 2.f);
  DeviceVector a(n);
  a.Set(ones);
  // The copy is enqueued on the compute stream only; the allreduce must see it.
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n * 4), cudaSuccess);
  std::copy(twos.begin(), twos.end(), pinned);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the ones have landed
  // 16 MiB from pinned memory: long enough that an allreduce that did not
  // wait for the compute stream would read the ones.
  ASSERT_EQ(cudaMemcpyAsync(a.ptr, pinned, n * 4, cudaMemcpyHostToDevice, compute), cudaSuccess);
  absl::Status s = (*comm)->AllReduce(a.ptr, n);
  ASSERT_TRUE(s.ok()) << s;
  // Read back into pinned memory on the stream the allreduce used, and wait
  // for that stream (not the legacy one) before looking.
  float* got_pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&got_pinned, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(got_pinned, a.ptr, n * 4, cudaMemcpyDeviceToHost, (*comm)->stream()),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize((*comm)->stream()), cudaSuccess);
  std::vector<float> got(got_pinned, got_pinned + n);
  EXPECT_EQ(got, twos);
  cudaFreeHost(got_pinned);
  cudaFreeHost(pinned);
  comm->reset();
  cudaStreamDestroy(compute);
}

}  // namespace
}  // namespace tandem
