// The bf16 handoff on a device (backend/cuda/bf16_handoff.h): a matmul after rmsnorm,
// add_rmsnorm or silu_mul multiplies the copy those ops wrote and must give exactly the floats
// of the path that converts x itself (a backend with the handoff off); a write in between must
// make it convert again (needs a GPU; see device_check.h).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

#include "backend/cuda/cuda_errors.h"
#include "backend/cuda/device_writes.h"
#include "device_check.h"

namespace qmpi::test {
namespace {

using CudaKernels = DeviceCheck;

constexpr int64_t kRows = 23, kWidth = 200, kOut = 72;

TEST_F(CudaKernels, MatmulAfterNormOrSiluEqualsConvertingPath) {
  CudaBackend plain(CudaBackendOptions{.bf16_handoff = false});
  WeightPair norm = weight(DType::BF16, 1, kWidth, 0.5f, 1.5f);
  WeightPair w = weight(DType::BF16, kOut, kWidth, -1.0f, 1.0f);
  WeightPair wk = weight(DType::BF16, 17, kWidth, -1.0f, 1.0f);
  WeightPair wf = weight(DType::F32, 9, kWidth, -1.0f, 1.0f);
  WeightPair bias = weight(DType::BF16, 1, kOut, -0.5f, 0.5f);
  const WeightView b = bias.gpu.view();
  const std::vector<float> x0 = random(size_t(kRows * kWidth), -3.0f, 3.0f);
  const std::vector<float> y0 = random(x0.size()), g0 = random(x0.size(), -4.0f, 4.0f),
                           u0 = random(x0.size());
  const size_t outs = size_t(kRows * kOut);

  // rmsnorm / add_rmsnorm / silu_mul, each followed by a matmul or a q/k/v-like group, on `be`;
  // every output, concatenated.
  auto run = [&](Backend& be) {
    Buffer x = to_gpu(x0), y = to_gpu(y0), gate = to_gpu(g0), up = to_gpu(u0);
    Buffer xn = poisoned(x0.size()), r1 = poisoned(outs), r2 = poisoned(outs), r3 = poisoned(outs),
           r4 = poisoned(size_t(kRows * 17)), r5 = poisoned(size_t(kRows * 9));
    gpu_->synchronize();  // the inputs were uploaded on gpu_'s stream
    be.rmsnorm(x.as<float>(), kRows, norm.gpu.view(), 1e-6f, xn.as<float>());
    be.matmul(xn.as<float>(), kRows, w.gpu.view(), &b, r1.as<float>());
    be.add_rmsnorm(x.as<float>(), y.as<float>(), kRows, norm.gpu.view(), 1e-6f, xn.as<float>());
    // A group with an f32 weight between two bf16 ones: both bf16 targets use the copy.
    const MatmulTarget group[] = {{w.gpu.view(), nullptr, r2.as<float>()},
                                  {wf.gpu.view(), nullptr, r5.as<float>()},
                                  {wk.gpu.view(), nullptr, r4.as<float>()}};
    be.matmul_group(xn.as<float>(), kRows, group);
    be.silu_mul(gate.as<float>(), up.as<float>(), kRows, kWidth, gate.as<float>());
    be.matmul(gate.as<float>(), kRows, w.gpu.view(), nullptr, r3.as<float>());
    be.synchronize();
    std::vector<float> all;
    for (const Buffer* r : {&r1, &r2, &r3, &r4, &r5}) {
      const size_t count = r == &r4 ? size_t(kRows * 17) : r == &r5 ? size_t(kRows * 9) : outs;
      const std::vector<float> v = from_gpu(*r, count);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> converted = run(plain);
  const std::vector<float> handed = run(*gpu_);
  ASSERT_EQ(handed.size(), converted.size());
  // The copy holds the bf16 rounding of the floats the op stored, as the conversion does.
  EXPECT_EQ(mismatches(handed, converted), 0u);
  // And the matmuls computed something: the NaN poison is gone.
  size_t nan = 0;
  for (float v : handed) nan += v != v;
  EXPECT_EQ(nan, 0u);
}

TEST_F(CudaKernels, WriteAfterNormMakesMatmulConvertAgain) {
  WeightPair norm = weight(DType::BF16, 1, kWidth, 0.5f, 1.5f);
  WeightPair w = weight(DType::BF16, kOut, kWidth, -1.0f, 1.0f);
  const std::vector<float> x0 = random(size_t(kRows * kWidth), -3.0f, 3.0f);
  const std::vector<float> y0 = random(x0.size());
  const size_t outs = size_t(kRows * kOut);
  Buffer x = to_gpu(x0), y = to_gpu(y0), xn = poisoned(x0.size());
  Buffer got = poisoned(outs), want = poisoned(outs);

  // Through a backend op: xn changes after the norm wrote its copy.
  gpu_->rmsnorm(x.as<float>(), kRows, norm.gpu.view(), 1e-6f, xn.as<float>());
  gpu_->add(xn.as<float>(), y.as<float>(), kRows * kWidth);
  gpu_->matmul(xn.as<float>(), kRows, w.gpu.view(), nullptr, got.as<float>());
  CudaBackend plain(CudaBackendOptions{.bf16_handoff = false});
  gpu_->synchronize();
  plain.matmul(xn.as<float>(), kRows, w.gpu.view(), nullptr, want.as<float>());
  plain.synchronize();
  EXPECT_EQ(mismatches(from_gpu(got, outs), from_gpu(want, outs)), 0u) << "after add";

  // Outside the backend (as a comm writes): the writer bumps the device-write generation.
  gpu_->rmsnorm(x.as<float>(), kRows, norm.gpu.view(), 1e-6f, xn.as<float>());
  gpu_->synchronize();
  cuda::note_device_write();
  cuda::check_cuda(
      cudaMemcpy(xn.data(), y.data(), y0.size() * sizeof(float), cudaMemcpyDeviceToDevice),
      "cudaMemcpy");
  gpu_->matmul(xn.as<float>(), kRows, w.gpu.view(), nullptr, got.as<float>());
  gpu_->synchronize();
  plain.matmul(xn.as<float>(), kRows, w.gpu.view(), nullptr, want.as<float>());
  plain.synchronize();
  EXPECT_EQ(mismatches(from_gpu(got, outs), from_gpu(want, outs)), 0u) << "after a copy";
}

}  // namespace
}  // namespace qmpi::test
