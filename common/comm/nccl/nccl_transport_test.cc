// The "nccl" transport without a device: linking nccl_transport registers
// it; the store adapter round-trips bytes and turns the store's exceptions
// into Statuses naming the key; with no GPU the factory's nccl communicator
// is UNAVAILABLE, not a crash.
#include "common/comm/nccl/nccl_transport.h"

#include <cuda_runtime.h>

#include <string>

#include "common/comm/factory.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(NcclTransport, LinkingRegistersNccl) {
  EXPECT_TRUE(TransportAvailable("nccl"));
  EXPECT_TRUE(CheckTransport("nccl").ok());
  EXPECT_EQ(AvailableTransports(), (std::vector<std::string>{"gloo", "nccl", "shm"}));
}

TEST(NcclTransport, KvOverStoreRoundTripsBytes) {
  gloo::rendezvous::HashStore store;
  NcclKv kv = NcclKvOverStore(&store);
  const std::string value("id\0with\xffnul", 11);
  ASSERT_TRUE(kv.put("p/nccl_unique_id", value).ok());
  absl::StatusOr<std::string> got = kv.get("p/nccl_unique_id", absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
}

TEST(NcclTransport, KvGetOfAMissingKeyIsDeadlineExceeded) {
  gloo::rendezvous::HashStore store;
  NcclKv kv = NcclKvOverStore(&store);
  absl::StatusOr<std::string> got = kv.get("p/never", absl::Milliseconds(20));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_NE(got.status().message().find("p/never"), std::string::npos) << got.status();
}

TEST(NcclTransport, NoDeviceIsUnavailableThroughTheFactory) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    GTEST_SKIP() << "a device is present";
  }
  gloo::rendezvous::HashStore store;
  CommOptions o;
  o.transport = "nccl";
  o.store = &store;
  absl::Status s = CreateCommunicator(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST(NcclTransport, OneRankAllReduceOnADevice) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "needs a device";
  }
  gloo::rendezvous::HashStore store;
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreate(&compute), cudaSuccess);
  CommOptions o;
  o.transport = "nccl";
  o.store = &store;
  o.prefix = "nccl_transport_test";
  o.cuda_stream = compute;
  absl::StatusOr<std::unique_ptr<Communicator>> c = CreateCommunicator(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->backend(), "nccl");
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4 * sizeof(float)), cudaSuccess);
  float* host = nullptr;  // pinned: the async copies really are async
  ASSERT_EQ(cudaMallocHost(&host, 8 * sizeof(float)), cudaSuccess);
  for (int i = 0; i < 4; ++i) host[i] = static_cast<float>(i + 1);
  float* back = host + 4;
  // Written on the compute stream: the collective must wait for it.
  ASSERT_EQ(cudaMemcpyAsync(d, host, 4 * sizeof(float), cudaMemcpyHostToDevice, compute),
            cudaSuccess);
  absl::Status s = (*c)->AllReduce(d, 4, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s;
  // The collective has completed (synchronous contract); read back on the
  // compute stream and wait for that stream before looking.
  ASSERT_EQ(cudaMemcpyAsync(back, d, 4 * sizeof(float), cudaMemcpyDeviceToHost, compute),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], static_cast<float>(i + 1));
  cudaFreeHost(host);
  cudaFree(d);
  c->reset();
  cudaStreamDestroy(compute);
}

}  // namespace
}  // namespace tandem
