#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/reference_ops.h"

namespace qmpi {
namespace {

using cpu::MatmulOptions;
using test::max_rel_err;

using PathFn = void (*)(const float*, int64_t, const WeightView&, const WeightView*, float*,
                        const MatmulOptions&);

struct Case {
  DType dtype;
  int64_t n, N, K;
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.dtype)) + " n=" + std::to_string(c.n) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K);
}

// Runs every path against the double reference, with and without a bias.
void check_exact(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  test::HostWeight w = test::random_weight(c.dtype, c.N, c.K, rng);
  test::HostWeight bias = test::random_weight(DType::BF16, 1, c.N, rng);
  std::vector<float> x = test::random_floats(size_t(c.n * c.K), rng);
  std::vector<float> want(size_t(c.n * c.N)), got(want.size());
  for (bool with_bias : {false, true}) {
    const WeightView bv = bias.view();
    const WeightView* b = with_bias ? &bv : nullptr;
    cpu::ref::matmul(x.data(), c.n, w.view(), b, want.data());
    const PathFn paths[] = {&cpu::matmul_gemv, &cpu::matmul_blocked, &cpu::matmul};
    for (PathFn path : paths) {
      for (int threads : {1, 2}) {
        std::fill(got.begin(), got.end(), -1.0f);
        path(x.data(), c.n, w.view(), b, got.data(), MatmulOptions{threads, false});
        EXPECT_LT(max_rel_err(got, want), 1e-5)
            << describe(c) << " bias " << with_bias << " threads " << threads;
      }
    }
  }
}

TEST(Matmul, ExactPathsMatchReferenceOnAwkwardShapes) {
  uint32_t seed = 1;
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (int64_t n : {1, 3, 17, 80, 100})
      for (auto [N, K] :
           {std::pair<int64_t, int64_t>{1, 1}, {5, 31}, {13, 45}, {37, 96}, {29, 133}})
        check_exact({t, n, N, K}, seed++);
}

// Batched decode: every batch size up to 64 on both paths, weight rows not a multiple of either
// tile (4 or 12 rows) and split into several blocks per thread, so that the prefetch of the next
// block and the last, short block both run.
TEST(Matmul, ExactPathsMatchReferenceForEveryBatchSize) {
  for (int64_t n = 1; n <= 64; ++n) check_exact({DType::BF16, n, 53, 133}, uint32_t(500 + n));
}

TEST(Matmul, LongPromptsAreMultipliedInChunks) {
  check_exact({DType::BF16, 531, 29, 133}, 3);
  check_exact({DType::F32, 300, 12, 64}, 4);
}

TEST(Matmul, ExactPathsMatchReferenceAtModelWidth) {
  check_exact({DType::BF16, 2, 40, 4864}, 7);
  check_exact({DType::F32, 33, 24, 896}, 8);
}

// The bf16-activation path equals the exact computation on bf16-rounded activations.
// n = 80: a wide panel of 64 tokens and a half one of 16; n = 300: a wide chunk of 256 tokens
// and a narrow one of 44 (kernels/cpu/matmul_blocked.cpp).
TEST(Matmul, Bf16ActivationPathMatchesReferenceOnRoundedInput) {
  uint32_t seed = 100;
  for (int64_t n : {1, 3, 17, 80, 100, 300})
    for (auto [N, K] : {std::pair<int64_t, int64_t>{7, 33}, {37, 96}, {29, 133}, {16, 896}}) {
      std::mt19937 rng(seed++);
      test::HostWeight w = test::random_weight(DType::BF16, N, K, rng);
      std::vector<float> x = test::random_floats(size_t(n * K), rng);
      std::vector<float> xr(x.size()), want(size_t(n * N)), exact(want.size()), got(want.size());
      cpu::round_to_bf16(x.data(), int64_t(x.size()), xr.data());
      cpu::ref::matmul(xr.data(), n, w.view(), nullptr, want.data());
      cpu::ref::matmul(x.data(), n, w.view(), nullptr, exact.data());
      const PathFn paths[] = {&cpu::matmul_gemv, &cpu::matmul_blocked};
      for (PathFn path : paths) {
        path(x.data(), n, w.view(), nullptr, got.data(), MatmulOptions{2, true});
        const Case c{DType::BF16, n, N, K};
        EXPECT_LT(max_rel_err(got, want), 1e-5) << describe(c);
        // Against exact activations the rounding of x shows: ~2^-9 per product, averaging
        // out over K (measured 1.4e-3 .. 3e-3 on these shapes).
        EXPECT_LT(max_rel_err(got, exact), 1e-2) << describe(c);
      }
    }
}

// Batched decode with bf16 activations: matmul() runs the GEMV (VDPBF16PS where the CPU has
// it) up to kGemvMaxRowsBf16 rows and the blocked path beyond, so the row counts 1 to 64 cover
// the GEMV's row-group tails (1..4 rows of x), the blocked path's half and full panels, weight
// rows not a multiple of either tile, and K with a masked (GEMV) or odd (blocked) last block.
TEST(Matmul, Bf16ActivationBatchedDecodeMatchesReference) {
  uint32_t seed = 300;
  for (int64_t n = 1; n <= 64; ++n)
    for (auto [N, K] : {std::pair<int64_t, int64_t>{5, 31}, {38, 897}, {9, 64}}) {
      std::mt19937 rng(seed++);
      test::HostWeight w = test::random_weight(DType::BF16, N, K, rng);
      std::vector<float> x = test::random_floats(size_t(n * K), rng);
      std::vector<float> xr(x.size()), want(size_t(n * N)), got(want.size());
      cpu::round_to_bf16(x.data(), int64_t(x.size()), xr.data());
      cpu::ref::matmul(xr.data(), n, w.view(), nullptr, want.data());
      test::HostWeight bias = test::random_weight(DType::BF16, 1, N, rng);
      std::vector<float> want_b(want.size());
      const WeightView bv = bias.view();
      cpu::ref::matmul(xr.data(), n, w.view(), &bv, want_b.data());
      for (int threads : {1, 2}) {
        std::fill(got.begin(), got.end(), -1.0f);
        cpu::matmul(x.data(), n, w.view(), nullptr, got.data(), MatmulOptions{threads, true});
        EXPECT_LT(max_rel_err(got, want), 1e-5) << describe({DType::BF16, n, N, K});
        cpu::matmul(x.data(), n, w.view(), &bv, got.data(), MatmulOptions{threads, true});
        EXPECT_LT(max_rel_err(got, want_b), 1e-5) << describe({DType::BF16, n, N, K}) << " bias";
      }
    }
}

TEST(Matmul, Bf16ActivationsLeaveOtherWeightDtypesExact) {
  std::mt19937 rng(5);
  for (DType t : {DType::F16, DType::F32}) {
    test::HostWeight w = test::random_weight(t, 19, 70, rng);
    std::vector<float> x = test::random_floats(size_t(20 * 70), rng);
    std::vector<float> want(size_t(20 * 19)), got(want.size());
    cpu::ref::matmul(x.data(), 20, w.view(), nullptr, want.data());
    cpu::matmul(x.data(), 20, w.view(), nullptr, got.data(), MatmulOptions{2, true});
    EXPECT_LT(max_rel_err(got, want), 1e-5) << dtype_name(t);
  }
}

TEST(Matmul, ThreadCountDoesNotChangeResults) {
  std::mt19937 rng(9);
  test::HostWeight w = test::random_weight(DType::BF16, 301, 257, rng);
  std::vector<float> x = test::random_floats(size_t(40 * 257), rng);
  for (int64_t n : {4, 40}) {
    std::vector<float> one(size_t(n * 301)), two(one.size());
    cpu::matmul(x.data(), n, w.view(), nullptr, one.data(), MatmulOptions{1, false});
    cpu::matmul(x.data(), n, w.view(), nullptr, two.data(), MatmulOptions{2, false});
    EXPECT_EQ(one, two) << "n=" << n;
  }
}

// A group (q/k/v, gate/up) splits the rows of all its targets over the threads at once; each
// output is still the dot product a lone matmul computes, so the results must be equal bit for
// bit. Row counts not a multiple of either tile (4 or 12) put a tile's rows in two targets'
// shares; 1, 3 and 16 rows of x take the GEMV (exact), 17 and 40 the blocked path; K = 133 has
// a tail. The weights are large enough that 2 threads are started (GEMV from 64k elements,
// blocked from 2M multiply-adds at 40 rows), so one thread's share spans several targets.
TEST(Matmul, GroupEqualsSeparateMatmulsBitForBit) {
  uint32_t seed = 700;
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (int64_t n : {1, 3, 16, 17, 40})
      for (bool bf16_act : {false, true}) {
        std::mt19937 rng(seed++);
        const int64_t K = 133;
        std::vector<test::HostWeight> ws, bs;
        for (int64_t rows : {253, 37, 229}) {
          ws.push_back(test::random_weight(t, rows, K, rng));
          bs.push_back(test::random_weight(DType::BF16, 1, rows, rng));
        }
        const std::vector<float> x = test::random_floats(size_t(n * K), rng);
        std::vector<WeightView> bias_views;
        for (const auto& b : bs) bias_views.push_back(b.view());
        for (int threads : {1, 2}) {
          const MatmulOptions opt{threads, bf16_act};
          std::vector<std::vector<float>> want(ws.size()), got(ws.size());
          std::vector<MatmulTarget> targets;
          for (size_t i = 0; i < ws.size(); ++i) {
            const WeightView* b = i == 1 ? nullptr : &bias_views[i];  // k_proj-like: no bias
            want[i].assign(size_t(n * ws[i].rows), 0.0f);
            got[i].assign(want[i].size(), -1.0f);
            cpu::matmul(x.data(), n, ws[i].view(), b, want[i].data(), opt);
            targets.push_back({ws[i].view(), b, got[i].data()});
          }
          cpu::matmul_group(x.data(), n, targets, opt);
          for (size_t i = 0; i < ws.size(); ++i)
            EXPECT_EQ(got[i], want[i]) << dtype_name(t) << " n=" << n << " bf16_act " << bf16_act
                                       << " threads " << threads << " target " << i;
        }
      }
}

// Targets of different dtypes cannot share one packed x: they run one by one.
TEST(Matmul, GroupOfMixedDtypesEqualsSeparateMatmuls) {
  std::mt19937 rng(11);
  const test::HostWeight a = test::random_weight(DType::BF16, 9, 40, rng);
  const test::HostWeight b = test::random_weight(DType::F32, 5, 40, rng);
  const std::vector<float> x = test::random_floats(size_t(3 * 40), rng);
  std::vector<float> wa(27), wb(15), ga(27, -1.0f), gb(15, -1.0f);
  cpu::matmul(x.data(), 3, a.view(), nullptr, wa.data(), {});
  cpu::matmul(x.data(), 3, b.view(), nullptr, wb.data(), {});
  const MatmulTarget ab[] = {{a.view(), nullptr, ga.data()}, {b.view(), nullptr, gb.data()}};
  cpu::matmul_group(x.data(), 3, ab, {});
  EXPECT_EQ(ga, wa);
  EXPECT_EQ(gb, wb);
}

TEST(Matmul, RejectsNonFloatWeights) {
  std::vector<int32_t> data(12, 1);
  std::vector<float> x(4, 1.0f), out(3);
  const WeightView w{data.data(), DType::I32, 3, 4, nullptr};
  try {
    cpu::matmul(x.data(), 1, w, nullptr, out.data(), {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::DTypeUnsupported);
    EXPECT_NE(e.message().find("I32"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace qmpi
