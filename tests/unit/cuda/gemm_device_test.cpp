// cuda::Gemm's split entry points (backend/cuda/gemm.h) against its one-call run(): x converted
// once to the weight's 16-bit type, then multiplied by several weights (needs a GPU; see
// device_check.h).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/device_allocator.h"
#include "backend/cuda/gemm.h"
#include "core/errors.h"
#include "device_check.h"

namespace qmpi::test {
namespace {

using CudaKernels = DeviceCheck;

TEST_F(CudaKernels, GemmConvertsOnceForSeveralWeights) {
  cuda::DeviceAllocator allocator;
  cuda::Gemm gemm(allocator, gpu_->stream(), size_t(4) << 20);
  for (DType dt : {DType::BF16, DType::F16}) {
    const int64_t n = 37, cols = 200;
    // q/k/v-like: three weights of different heights read the same x.
    WeightPair a = weight(dt, 300, cols, -1.0f, 1.0f), b = weight(dt, 64, cols, -1.0f, 1.0f),
               c = weight(dt, 65, cols, -1.0f, 1.0f);
    Buffer x = to_gpu(random(size_t(n * cols), -2.0f, 2.0f));
    const void* x16 = gemm.convert_input(x.as<float>(), n, a.gpu.view());
    for (const WeightPair* w : {&a, &b, &c}) {
      const size_t count = size_t(n * w->gpu.rows);
      Buffer once = poisoned(count), each = poisoned(count);
      gemm.run_16bit(x16, n, w->gpu.view(), once.as<float>());
      gpu_->matmul(x.as<float>(), n, w->gpu.view(), nullptr, each.as<float>());
      const std::vector<float> want = from_gpu(each, count);
      // The same rounded x and the same cuBLAS call: the same floats.
      EXPECT_EQ(mismatches(from_gpu(once, count), want), 0u)
          << name_of(dt) << " weight of " << w->gpu.rows << " rows";
    }
  }
  // An F32 weight has no 16-bit input.
  WeightPair f = weight(DType::F32, 8, 8, -1.0f, 1.0f);
  Buffer x = to_gpu(random(8));
  EXPECT_THROW(gemm.convert_input(x.as<float>(), 1, f.gpu.view()), Error);
}

}  // namespace
}  // namespace qmpi::test
