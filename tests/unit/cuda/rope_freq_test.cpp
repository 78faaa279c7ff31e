// The CUDA backend's RoPE frequencies turn by exactly the CPU backend's angles.
#include "backend/cuda/rope_freq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/rope.h"

namespace qmpi::cuda {
namespace {

TEST(RopeFreq, RotationFromTheseFrequenciesEqualsTheCpuTable) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (const auto& [theta, dim] : {std::pair{1e6, 64}, std::pair{1e4, 128}, std::pair{5e5, 80}}) {
    const int32_t heads = 3, half = dim / 2;
    const std::vector<int32_t> positions = {0, 1, 17, 4095, 32767};
    std::vector<float> x(positions.size() * heads * size_t(dim));
    for (float& v : x) v = u(rng);
    std::vector<float> want = x;
    cpu::RopeTable(theta, dim)
        .apply(want.data(), int64_t(positions.size()), heads, positions.data(), 1);
    const std::vector<float> inv = rope_inv_freq(theta, dim);
    ASSERT_EQ(inv.size(), size_t(half));
    for (size_t t = 0; t < positions.size(); ++t)
      for (int32_t h = 0; h < heads; ++h)
        for (int32_t m = 0; m < half; ++m) {
          const float angle = float(positions[t]) * inv[size_t(m)];
          const float c = float(std::cos(double(angle))), s = float(std::sin(double(angle)));
          const size_t base = (t * heads + size_t(h)) * size_t(dim);
          const float a = x[base + size_t(m)], b = x[base + size_t(m + half)];
          ASSERT_EQ(want[base + size_t(m)], a * c - b * s)
              << "theta " << theta << " pos " << positions[t] << " m " << m;
          ASSERT_EQ(want[base + size_t(m + half)], b * c + a * s);
        }
  }
}

TEST(RopeFreq, OddHeadDimIsRejected) {
  EXPECT_THROW(rope_inv_freq(1e6, 63), Error);
}

}  // namespace
}  // namespace qmpi::cuda
