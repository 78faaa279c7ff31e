// The bf16 copy of a GEMM input on a device (backend/activation.h): rmsnorm, add_rmsnorm and
// silu_mul given a bf16 view write their output's rounding into it, and a matmul given that
// pair multiplies the copy, which must give exactly the floats of converting x itself (the same
// calls without views); a copy of the wrong shape is refused (needs a GPU; see device_check.h).
#include <gtest/gtest.h>

#include <vector>

#include "core/errors.h"
#include "device_check.h"

namespace qmpi::test {
namespace {

using CudaKernels = DeviceCheck;

constexpr int64_t kRows = 23, kWidth = 200, kOut = 72;

TEST_F(CudaKernels, MatmulOfTheOpsCopyEqualsConvertingPath) {
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

  // rmsnorm / add_rmsnorm / silu_mul, each followed by a matmul or a q/k/v-like group, with or
  // without bf16 copies; every output, concatenated, and the last copy the norm wrote.
  std::vector<uint16_t> norm_copy(x0.size());
  std::vector<float> normed(x0.size());
  auto run = [&](bool copies) {
    Buffer x = to_gpu(x0), y = to_gpu(y0), gate = to_gpu(g0), up = to_gpu(u0);
    Buffer xn = poisoned(x0.size()), r1 = poisoned(outs), r2 = poisoned(outs), r3 = poisoned(outs),
           r4 = poisoned(size_t(kRows * 17)), r5 = poisoned(size_t(kRows * 9));
    Buffer xn16 = gpu_->alloc(x0.size() * 2), gate16 = gpu_->alloc(x0.size() * 2);
    const auto view = [&](Buffer& buf) {
      return copies ? ActivationView{buf.data(), DType::BF16, kRows, kWidth} : ActivationView{};
    };
    gpu_->rmsnorm(x.as<float>(), kRows, norm.gpu.view(), 1e-6f, xn.as<float>(), view(xn16));
    gpu_->matmul({xn.as<float>(), view(xn16)}, kRows, w.gpu.view(), &b, r1.as<float>());
    gpu_->add_rmsnorm(x.as<float>(), y.as<float>(), kRows, norm.gpu.view(), 1e-6f, xn.as<float>(),
                      view(xn16));
    // A group with an f32 weight between two bf16 ones: both bf16 targets use the copy.
    const MatmulTarget group[] = {{w.gpu.view(), nullptr, r2.as<float>()},
                                  {wf.gpu.view(), nullptr, r5.as<float>()},
                                  {wk.gpu.view(), nullptr, r4.as<float>()}};
    gpu_->matmul_group({xn.as<float>(), view(xn16)}, kRows, group);
    gpu_->silu_mul(gate.as<float>(), up.as<float>(), kRows, kWidth, gate.as<float>(), view(gate16));
    gpu_->matmul({gate.as<float>(), view(gate16)}, kRows, w.gpu.view(), nullptr, r3.as<float>());
    gpu_->synchronize();
    if (copies) {
      gpu_->copy_to_host(norm_copy.data(), xn16.data(), norm_copy.size() * 2);
      normed = from_gpu(xn, normed.size());
    }
    std::vector<float> all;
    for (const Buffer* r : {&r1, &r2, &r3, &r4, &r5}) {
      const size_t count = r == &r4 ? size_t(kRows * 17) : r == &r5 ? size_t(kRows * 9) : outs;
      const std::vector<float> v = from_gpu(*r, count);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> converted = run(false);
  const std::vector<float> copied = run(true);
  ASSERT_EQ(copied.size(), converted.size());
  // The copy holds the bf16 rounding of the floats the op stored, as the conversion does.
  size_t wrong = 0;
  for (size_t i = 0; i < normed.size(); ++i) wrong += norm_copy[i] != f32_to_bf16(normed[i]);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(mismatches(copied, converted), 0u);
  // And the matmuls computed something: the NaN poison is gone.
  size_t nan = 0;
  for (float v : copied) nan += v != v;
  EXPECT_EQ(nan, 0u);
}

TEST_F(CudaKernels, CopyOfAnotherShapeIsRefused) {
  WeightPair norm = weight(DType::BF16, 1, kWidth, 0.5f, 1.5f);
  WeightPair w = weight(DType::BF16, kOut, kWidth, -1.0f, 1.0f);
  Buffer x = poisoned(size_t(kRows * kWidth)), out = poisoned(size_t(kRows * kOut));
  Buffer x16 = gpu_->alloc(size_t(kRows * kWidth) * 2);
  const ActivationView short_rows{x16.data(), DType::BF16, kRows - 1, kWidth};
  EXPECT_THROW(
      gpu_->rmsnorm(x.as<float>(), kRows, norm.gpu.view(), 1e-6f, x.as<float>(), short_rows),
      Error);
  EXPECT_THROW(
      gpu_->matmul({x.as<float>(), short_rows}, kRows, w.gpu.view(), nullptr, out.as<float>()),
      Error);
  // The kernels write bf16 copies only.
  const ActivationView f16{x16.data(), DType::F16, kRows, kWidth};
  EXPECT_THROW(gpu_->silu_mul(x.as<float>(), x.as<float>(), kRows, kWidth, x.as<float>(), f16),
               Error);
}

}  // namespace
}  // namespace qmpi::test
