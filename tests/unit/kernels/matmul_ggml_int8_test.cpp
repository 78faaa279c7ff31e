// The int8-activation GGUF GEMV (matmul_ggml_int8.cpp) against the float64 reference: within the
// bound its header states (each activation off by at most half its 32-block's step), and within
// float32 rounding of the same product computed in float64 from the activations quantized as the
// kernel quantizes them; 1 to 16 rows of x (the kernel's tiles of 4 and their remainders), 1 to
// 64 weight rows, odd counts among them (the 32-element types' pairs of rows and the last one
// alone), a bias; matmul_ggml's dispatch under bf16_activations; and the fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/matmul_ggml.h"
#include "tests/unit/kernels/ggml_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace qmpi {
namespace {

using test::HostGgml;
using test::random_floats;
using test::random_ggml;

#if defined(QMPI_CPU_INT8_DOT)  // where the kernel exists

constexpr GgmlType kInt8Types[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K,
                                   GgmlType::Q6_K};

std::vector<float> dequantize(const GgmlWeightView& w) {
  std::vector<float> out(size_t(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r)
    cpu::dequantize_ggml_row(w.type, w.data + r * w.row_bytes, &out[size_t(r * w.cols)], w.cols);
  return out;
}

// x as the kernel sees it: per 32-block, step max|x| / 127, quants rounded to nearest even.
std::vector<double> quantized(const std::vector<float>& x) {
  std::vector<double> q(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float dx = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (size_t i = b; i < b + 32; ++i) q[i] = double(dx) * std::nearbyint(double(x[i] * inv));
  }
  return q;
}

struct Check {
  double worst_vs_bound = 0;     // max |got - exact| / stated bound
  double worst_vs_emulated = 0;  // max |got - emulated| / sum |w x|
};

Check check(const GgmlWeightView& w, const std::vector<float>& x, int64_t n,
            const std::vector<float>& bias) {
  const WeightView bv{bias.data(), DType::F32, 1, w.rows, nullptr};
  std::vector<float> got(size_t(n * w.rows), -1.0f);
  EXPECT_TRUE(cpu::matmul_ggml_gemv_int8(x.data(), n, w, &bv, got.data(), {2, true}));
  const std::vector<float> wf = dequantize(w);
  const std::vector<double> xq = quantized(x);
  Check c;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < w.rows; ++r) {
      double exact = bias[size_t(r)], emulated = bias[size_t(r)], bound = 0, magnitude = 0;
      for (int64_t b = 0; b < w.cols; b += 32) {
        double amax = 0, wsum = 0;
        for (int64_t k = b; k < b + 32; ++k) {
          const double wk = wf[size_t(r * w.cols + k)], xk = x[size_t(i * w.cols + k)];
          exact += wk * xk;
          emulated += wk * xq[size_t(i * w.cols + k)];
          magnitude += std::fabs(wk * xk);
          amax = std::max(amax, std::fabs(xk));
          wsum += std::fabs(wk);
        }
        bound += amax / 254.0 * wsum;
      }
      const double g = got[size_t(i * w.rows + r)];
      // float32 rounding of the scaled block sums: a few ulps of the products' magnitude.
      c.worst_vs_bound =
          std::max(c.worst_vs_bound, std::fabs(g - exact) / (bound + 1e-5 * magnitude + 1e-30));
      c.worst_vs_emulated =
          std::max(c.worst_vs_emulated, std::fabs(g - emulated) / (magnitude + 1e-30));
    }
  return c;
}

TEST(MatmulGgmlInt8, WithinItsBoundOfTheFloat64ReferenceOverShapes) {
  std::mt19937 rng(36);
  for (GgmlType t : kInt8Types) {
    const int64_t cols = ggml_type_info(uint32_t(t))->block_elems == 256 ? 3 * 256 : 5 * 64;
    for (int64_t rows : {1, 2, 7, 33, 64})
      for (int64_t n : {1, 3, 4, 5, 8, 16}) {
        const HostGgml h = random_ggml(t, rows, cols, rng);
        const std::vector<float> x = random_floats(size_t(n * cols), rng);
        const std::vector<float> bias = random_floats(size_t(rows), rng);
        const Check c = check(h.v, x, n, bias);
        const std::string_view name = ggml_type_info(uint32_t(t))->name;
        EXPECT_LE(c.worst_vs_bound, 1.0) << name << " rows " << rows << " n " << n;
        EXPECT_LT(c.worst_vs_emulated, 1e-5) << name << " rows " << rows << " n " << n;
      }
  }
}

// Activations with a wide spread inside a block: the small ones lose most of their bits, and the
// result must still be within the bound (and is measurably less exact than the float path).
TEST(MatmulGgmlInt8, OutliersStayWithinTheBound) {
  std::mt19937 rng(5);
  for (GgmlType t : kInt8Types) {
    const int64_t cols = ggml_type_info(uint32_t(t))->block_elems == 256 ? 256 : 128;
    const HostGgml h = random_ggml(t, 9, cols, rng);
    std::vector<float> x = random_floats(size_t(2 * cols), rng, 0.01f);
    for (size_t i = 0; i < x.size(); i += 37) x[i] = 50.0f;
    const Check c = check(h.v, x, 2, std::vector<float>(9, 0.0f));
    EXPECT_LE(c.worst_vs_bound, 1.0) << ggml_type_info(uint32_t(t))->name;
    EXPECT_LT(c.worst_vs_emulated, 1e-5) << ggml_type_info(uint32_t(t))->name;
  }
}

TEST(MatmulGgmlInt8, MatmulGgmlRunsItUnderBf16ActivationsOnly) {
  std::mt19937 rng(8);
  const HostGgml h = random_ggml(GgmlType::Q8_0, 16, 256, rng);
  const std::vector<float> x = random_floats(3 * 256, rng);
  std::vector<float> via_dispatch(48), int8(48), exact(48);
  cpu::matmul_ggml(x.data(), 3, h.v, nullptr, via_dispatch.data(), {2, true});
  ASSERT_TRUE(cpu::matmul_ggml_gemv_int8(x.data(), 3, h.v, nullptr, int8.data(), {2, true}));
  EXPECT_EQ(via_dispatch, int8);
  cpu::matmul_ggml(x.data(), 3, h.v, nullptr, exact.data(), {2, false});
  EXPECT_NE(exact, int8);  // the exact path is not the int8 one
}

#endif

// The kernel exists exactly where dot_products.h (and so `qmpi --version`) says it does.
TEST(MatmulGgmlInt8, ExistsWhereTheBuildSaysItHasInt8DotProducts) {
  std::mt19937 rng(4);
  const HostGgml h = random_ggml(GgmlType::Q8_0, 4, 256, rng);
  EXPECT_EQ(cpu::ggml_int8_supported(h.v), cpu::kHaveInt8Dot) << cpu::dot_products_summary();
  const std::vector<float> x = random_floats(256, rng);
  std::vector<float> out(4);
  EXPECT_EQ(cpu::matmul_ggml_gemv_int8(x.data(), 1, h.v, nullptr, out.data(), {1, true}),
            cpu::kHaveInt8Dot);
}

TEST(MatmulGgmlInt8, OtherTypesAndOddBlockCountsKeepTheExactPath) {
  std::mt19937 rng(9);
  // Q5_K has no int8 kernel; a Q8_0 row of 9 blocks is not whole pairs of blocks.
  for (const auto& [t, cols] :
       {std::pair{GgmlType::Q5_K, int64_t(256)}, std::pair{GgmlType::Q8_0, int64_t(9 * 32)}}) {
    const HostGgml h = random_ggml(t, 5, cols, rng);
    EXPECT_FALSE(cpu::ggml_int8_supported(h.v));
    const std::vector<float> x = random_floats(size_t(2 * cols), rng);
    std::vector<float> got(10), want(10);
    cpu::matmul_ggml(x.data(), 2, h.v, nullptr, got.data(), {2, true});
    cpu::matmul_ggml_reference(x.data(), 2, h.v, nullptr, want.data());
    EXPECT_LT(test::max_rel_err(got, want), 2e-5);
  }
}

}  // namespace
}  // namespace qmpi
