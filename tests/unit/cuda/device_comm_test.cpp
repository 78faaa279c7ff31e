// The staged MPI comm's device <-> host round trips (needs a GPU), over a one-rank stand-in for
// the host comm that changes the data it is given, so a result that skipped the host shows.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cuda/copy_bandwidth.h"
#include "device_check.h"
#include "parallel/nccl/comm_staged_mpi.h"

namespace qmpi::test {
namespace {

// One rank whose all-reduce doubles (as two equal ranks would sum) and whose send/recv loop
// back to itself.
class DoublingComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "doubling"; }
  void all_reduce_sum(float* data, size_t count) override {
    for (size_t i = 0; i < count; ++i) data[i] *= 2.0f;
  }
  void all_gather(const void* send, void* recv, size_t bytes) override {
    std::memcpy(recv, send, bytes);
  }
  void broadcast(void*, size_t, int) override {}
  void send(const void* data, size_t bytes, int) override {
    sent_.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  }
  void recv(void* data, size_t bytes, int) override { std::memcpy(data, sent_.data(), bytes); }
  void barrier() override {}

 private:
  std::vector<char> sent_;
};

using CudaStagedComm = DeviceCheck;

TEST_F(CudaStagedComm, DeviceBuffersGoThroughTheHostCommAndBack) {
  StagedMpiComm comm(std::make_unique<DoublingComm>());
  const std::vector<float> x = random(100000);
  Buffer d = to_gpu(x);
  comm.all_reduce_sum(d.as<float>(), x.size());
  std::vector<float> doubled = x;
  for (float& v : doubled) v *= 2.0f;
  EXPECT_EQ(mismatches(from_gpu(d, x.size()), doubled), 0u);

  Buffer gathered = poisoned(x.size());
  comm.all_gather(d.data(), gathered.data(), x.size() * sizeof(float));
  EXPECT_EQ(mismatches(from_gpu(gathered, x.size()), doubled), 0u);

  Buffer received = poisoned(x.size());
  comm.send(d.data(), x.size() * sizeof(float), 0);
  comm.recv(received.data(), x.size() * sizeof(float), 0);
  EXPECT_EQ(mismatches(from_gpu(received, x.size()), doubled), 0u);
}

TEST_F(CudaStagedComm, StagingWaitsForQueuedKernels) {
  // The add is only enqueued on the backend's stream when the comm starts copying.
  StagedMpiComm comm(std::make_unique<DoublingComm>());
  const std::vector<float> x = random(1 << 22), y = random(1 << 22);
  Buffer dx = to_gpu(x), dy = to_gpu(y);
  gpu_->add(dx.as<float>(), dy.as<float>(), int64_t(x.size()));
  comm.all_reduce_sum(dx.as<float>(), x.size());
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = (x[i] + y[i]) * 2.0f;
  EXPECT_EQ(mismatches(from_gpu(dx, x.size()), want), 0u);
}

using CudaDevice = DeviceCheck;

// Measures the copy bandwidth the roofline uses (printed for bench/gpu_check.sh) and checks the
// copy itself. 1 GiB per buffer: many times any L2.
TEST_F(CudaDevice, CopyBandwidth) {
  const size_t count = size_t(1) << 28;
  std::vector<float> host(count);
  uint32_t s = seed_ | 1u;
  for (float& v : host) {
    s = s * 1664525u + 1013904223u;
    v = float(s >> 8);
  }
  Buffer src = to_gpu(host), dst = poisoned(count);
  const double gbps =
      measure_copy_bandwidth(*gpu_, src.data(), dst.data(), count * sizeof(float), 20);
  EXPECT_EQ(mismatches(from_gpu(dst, count), host), 0u);
  EXPECT_GT(gbps, 0.0);
  std::printf("copy_bandwidth_gbps=%.1f\n", gbps);
}

}  // namespace
}  // namespace qmpi::test
