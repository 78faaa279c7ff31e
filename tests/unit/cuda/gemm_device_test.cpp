// cuda::Gemm's split entry points (backend/cuda/gemm.h) against its one-call run(): x converted
// once to the weight's 16-bit type, then multiplied by several weights (needs a GPU; see
// device_check.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

TEST_F(CudaKernels, MatmulGroupEqualsSeparateMatmuls) {
  const int64_t n = 19, cols = 136;
  // bf16 q with a bias, bf16 k, an f32 v between two bf16 ones: the group converts x once per
  // 16-bit run and must give the floats matmul gives target by target.
  WeightPair q = weight(DType::BF16, 96, cols, -1.0f, 1.0f),
             k = weight(DType::BF16, 33, cols, -1.0f, 1.0f),
             v = weight(DType::F32, 17, cols, -1.0f, 1.0f),
             o = weight(DType::BF16, 40, cols, -1.0f, 1.0f);
  WeightPair bias = weight(DType::BF16, 1, 96, -0.5f, 0.5f);
  Buffer x = to_gpu(random(size_t(n * cols), -2.0f, 2.0f));
  const WeightView b = bias.gpu.view();
  const WeightPair* ws[] = {&q, &k, &v, &o};
  std::vector<Buffer> group, each;
  std::vector<MatmulTarget> targets;
  group.reserve(4);
  each.reserve(4);
  for (const WeightPair* w : ws) {
    group.push_back(poisoned(size_t(n * w->gpu.rows)));
    each.push_back(poisoned(size_t(n * w->gpu.rows)));
    targets.push_back({w->gpu.view(), w == &q ? &b : nullptr, group.back().as<float>()});
  }
  gpu_->matmul_group(x.as<float>(), n, targets);
  for (size_t i = 0; i < targets.size(); ++i) {
    gpu_->matmul(x.as<float>(), n, targets[i].w, targets[i].bias, each[i].as<float>());
    const size_t count = size_t(n * targets[i].w.rows);
    EXPECT_EQ(mismatches(from_gpu(group[i], count), from_gpu(each[i], count)), 0u)
        << "target " << i;
  }
}

}  // namespace
}  // namespace qmpi::test
