// The FP8 GEMV and blocked paths against the plain reference, and the reference's e4m3 decoding
// against values worked out by hand from the format (1 sign, 4 exponent bits with bias 7, 3
// mantissa bits, subnormals at exponent 0), on block grids with partial edge blocks and with a
// TP slice that starts inside a block (row and column offsets).
#include "kernels/cpu/matmul_fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"

namespace qmpi {
namespace {

using test::max_rel_err;
using test::random_floats;

struct HostFp8 {
  std::vector<uint8_t> q;
  std::vector<float> scales;
  Fp8WeightView v;
};

// rows x cols e4m3 codes (every finite code, NaN codes redrawn) and scales for the grid that a
// slice at (row_offset, col_offset) of blocks bn x bk touches.
HostFp8 random_fp8(int64_t rows, int64_t cols, int64_t bn, int64_t bk, int64_t row_offset,
                   int64_t col_offset, std::mt19937& rng) {
  HostFp8 h;
  h.q.resize(size_t(rows * cols));
  for (auto& c : h.q) {
    do c = uint8_t(rng() & 0xff);
    while ((c & 0x7f) == 0x7f);
  }
  const int64_t sr = (rows + row_offset + bn - 1) / bn, sc = (cols + col_offset + bk - 1) / bk;
  std::uniform_real_distribution<float> s(1e-3f, 4e-3f);
  h.scales.resize(size_t(sr * sc));
  for (auto& x : h.scales) x = s(rng);
  h.v = {h.q.data(), h.scales.data(), rows, cols, sr, sc, bn, bk, row_offset, col_offset};
  return h;
}

using Path = void (*)(const float*, int64_t, const Fp8WeightView&, const WeightView*, float*,
                      const cpu::MatmulOptions&);

std::vector<float> run(Path f, const HostFp8& h, const std::vector<float>& x, int64_t n,
                       const WeightView* bias, int threads) {
  std::vector<float> out(size_t(n * h.v.rows), -1.0f);
  f(x.data(), n, h.v, bias, out.data(), {threads, false});
  return out;
}

TEST(MatmulFp8, E4m3CodesDecodeAsTheFormatSays) {
  const float* t = cpu::e4m3_table();
  EXPECT_EQ(t[0x00], 0.0f);
  EXPECT_EQ(t[0x38], 1.0f);    // exponent 7 = 2^0
  EXPECT_EQ(t[0x7e], 448.0f);  // 1.75 * 2^8, the largest finite value
  EXPECT_EQ(t[0xfe], -448.0f);
  EXPECT_EQ(t[0x08], std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(t[0x01], std::ldexp(1.0f, -9));  // smallest subnormal: 1/8 * 2^-6
  EXPECT_EQ(t[0x07], 7.0f * std::ldexp(1.0f, -9));
  EXPECT_EQ(t[0x3b], 1.375f);
  EXPECT_TRUE(std::isnan(t[0x7f]) && std::isnan(t[0xff]));
}

TEST(MatmulFp8, PathsMatchReferenceOnEveryGridShape) {
  std::mt19937 rng(11);
  struct Case {
    int64_t rows, cols, bn, bk, row_offset, col_offset;
  };
  const std::vector<Case> cases = {
      {128, 256, 128, 128, 0, 0},   // whole blocks
      {192, 192, 128, 128, 0, 0},   // partial edge blocks both ways (hidden 192)
      {96, 192, 128, 128, 96, 0},   // a column-parallel slice starting inside a block
      {37, 150, 128, 128, 64, 80},  // both offsets, odd sizes, a 16-lane tail
      {50, 70, 16, 32, 3, 5},       // small blocks: many scale changes per row
      {257, 237, 128, 128, 0, 0},   // rows crossing two block rows; a 32-code step, then 13 masked
      {131, 224, 128, 128, 5, 0},   // 4-row tiles straddling a block row; 3 x 64 + 32 codes
  };
  for (const Case& c : cases) {
    const HostFp8 h = random_fp8(c.rows, c.cols, c.bn, c.bk, c.row_offset, c.col_offset, rng);
    const std::vector<float> bias_v = random_floats(size_t(c.rows), rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, c.rows, nullptr};
    for (int64_t n : {1, 2, 3, 8, 9, 16, 17, 40}) {
      const std::vector<float> x = random_floats(size_t(n * c.cols), rng);
      for (const WeightView* b : {static_cast<const WeightView*>(nullptr), &bias})
        for (int threads : {1, 2}) {
          std::vector<float> want(size_t(n * c.rows));
          cpu::matmul_fp8_reference(x.data(), n, h.v, b, want.data());
          const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                   " offsets " + std::to_string(c.row_offset) + "," +
                                   std::to_string(c.col_offset) + " n " + std::to_string(n) +
                                   (b ? " bias" : "") + " threads " + std::to_string(threads);
          EXPECT_LT(max_rel_err(run(cpu::matmul_fp8_gemv, h, x, n, b, threads), want), 2e-6)
              << what;
          EXPECT_LT(max_rel_err(run(cpu::matmul_fp8_blocked, h, x, n, b, threads), want), 2e-6)
              << what;
          EXPECT_LT(max_rel_err(run(cpu::matmul_fp8, h, x, n, b, threads), want), 2e-6) << what;
        }
    }
  }
}

// With bf16 activations the blocked path runs the bf16 GEMM's tiles on decoded rows, scaling each
// scale block's partial sums: it equals the reference on x rounded to bf16 up to float32 sums
// (measured 0.7e-7 .. 2.3e-7 at 64 rows). Rows 1..64 cover the GEMM's half panels (a tile per
// scale block) and, from 17 rows, its scaled tiles on full and half-width panels; the shapes give
// tiles of rows that straddle block rows, partial and offset scale blocks, an odd K (the last
// weight paired with x's zero) and, with an odd column offset (pairs of inputs across a block
// edge), the float path's fallback, which is exact. matmul_fp8 as the model calls it picks the GEMV
// below 12 rows: up to 3 rows with VDPBF16PS and scale blocks on 64-code steps its bf16 route, else
// float32.
TEST(MatmulFp8, Bf16ActivationBlockedPathMatchesReferenceOnRoundedInput) {
  std::mt19937 rng(23);
  struct Case {
    int64_t rows, cols, bn, bk, row_offset, col_offset;
  };
  const std::vector<Case> cases = {
      {37, 150, 128, 128, 64, 80},  // both offsets, a partial first and last scale block
      {131, 301, 128, 128, 5, 0},   // tiles straddling a block row; odd K
      {50, 70, 16, 32, 4, 6},       // small blocks: many scale blocks per tile
      {13, 40, 8, 16, 3, 5},        // odd column offset: the float32 path
      {96, 200, 128, 128, 32, 64},  // blocks on 64-code steps: a first block of 64 codes
  };
  for (const Case& c : cases) {
    const HostFp8 h = random_fp8(c.rows, c.cols, c.bn, c.bk, c.row_offset, c.col_offset, rng);
    const std::vector<float> bias_v = random_floats(size_t(c.rows), rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, c.rows, nullptr};
    for (int64_t n = 1; n <= 64; ++n) {
      const std::vector<float> x = random_floats(size_t(n * c.cols), rng);
      std::vector<float> xr(x.size()), want(size_t(n * c.rows)), exact(want.size());
      cpu::round_to_bf16(x.data(), int64_t(x.size()), xr.data());
      const bool rounded = c.col_offset % 2 == 0;  // else exact float32
      cpu::matmul_fp8_reference(rounded ? xr.data() : x.data(), n, h.v, &bias, want.data());
      cpu::matmul_fp8_reference(x.data(), n, h.v, &bias, exact.data());
      for (int threads : {1, 2}) {
        std::vector<float> got(want.size(), -1.0f);
        cpu::matmul_fp8_blocked(x.data(), n, h.v, &bias, got.data(), {threads, true});
        const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                 " offsets " + std::to_string(c.row_offset) + "," +
                                 std::to_string(c.col_offset) + " n " + std::to_string(n) +
                                 " threads " + std::to_string(threads);
        EXPECT_LT(max_rel_err(got, want), 1e-5) << what;
        // Against exact activations x's rounding shows (~2^-9 a product, averaging out:
        // measured 1.2e-3 .. 2.1e-3, as for bf16 weights).
        EXPECT_LT(max_rel_err(got, exact), 1e-2) << what;
        std::fill(got.begin(), got.end(), -1.0f);  // no output left over from the blocked path
        cpu::matmul_fp8(x.data(), n, h.v, &bias, got.data(), {threads, true});
        EXPECT_LT(max_rel_err(got, exact), 1e-2) << what << " (matmul_fp8)";
        // Whichever path it takes (the GEMV's float32 or bf16 route, the tiles), its products
        // are those of x rounded to bf16 or of x itself, nothing in between.
        EXPECT_LT(std::min(max_rel_err(got, want), max_rel_err(got, exact)), 1e-5)
            << what << " (matmul_fp8)";
      }
    }
  }
}

// A group (q/k/v-like: one x, targets of different heights, grids and row offsets, one without
// a bias) gives each target what it gives alone, on both GEMV and tile paths, with and without
// bf16 activations; the threads' shares cross the targets' boundaries at odd rows.
TEST(MatmulFp8, GroupGivesEachTargetItsOwnProduct) {
  std::mt19937 rng(31);
  const int64_t K = 150;
  std::vector<HostFp8> hs;
  hs.push_back(random_fp8(37, K, 128, 128, 64, 80, rng));
  hs.push_back(random_fp8(13, K, 16, 32, 3, 80 % 32, rng));
  hs.push_back(random_fp8(70, K, 128, 128, 0, 80, rng));
  const std::vector<float> bias_v = random_floats(70, rng);
  const WeightView bias0{bias_v.data(), DType::F32, 1, 37, nullptr};
  const WeightView bias2{bias_v.data(), DType::F32, 1, 70, nullptr};
  const std::vector<const WeightView*> biases = {&bias0, nullptr, &bias2};
  for (int64_t n : {1, 4, 11, 12, 16, 40}) {
    const std::vector<float> x = random_floats(size_t(n * K), rng);
    for (bool bf16 : {false, true})
      for (int threads : {1, 2, 3}) {
        std::vector<std::vector<float>> got(hs.size()), alone(hs.size());
        std::vector<Fp8Target> targets;
        for (size_t i = 0; i < hs.size(); ++i) {
          got[i].assign(size_t(n * hs[i].v.rows), -1.0f);
          alone[i].assign(got[i].size(), -2.0f);
          targets.push_back({hs[i].v, biases[i], got[i].data()});
          cpu::matmul_fp8(x.data(), n, hs[i].v, biases[i], alone[i].data(), {threads, bf16});
        }
        cpu::matmul_fp8_group(x.data(), n, targets, {threads, bf16});
        for (size_t i = 0; i < hs.size(); ++i)
          EXPECT_LT(max_rel_err(got[i], alone[i]), 1e-6)
              << "target " << i << " n " << n << (bf16 ? " bf16" : "") << " threads " << threads;
      }
  }
}

TEST(MatmulFp8, ReferenceIsTheBlockScaledSum) {
  // One row, two column blocks of 2: W = [e4m3(0x38) * 2, e4m3(0x40) * 2, e4m3(0xb8) * 0.5].
  const std::vector<uint8_t> q = {0x38, 0x40, 0xb8};  // 1, 2, -1
  const std::vector<float> s = {2.0f, 0.5f};
  const Fp8WeightView v{q.data(), s.data(), 1, 3, 1, 2, 1, 2, 0, 0};
  const std::vector<float> x = {1.0f, 10.0f, 100.0f};
  float out = 0.0f;
  cpu::matmul_fp8_reference(x.data(), 1, v, nullptr, &out);
  EXPECT_EQ(out, 1.0f * 2 + 2.0f * 2 * 10 - 1.0f * 0.5f * 100);
  float fast = 0.0f;
  cpu::matmul_fp8(x.data(), 1, v, nullptr, &fast, {});
  EXPECT_EQ(fast, out);
}

TEST(MatmulFp8, RejectsGridsThatDoNotCoverTheWeight) {
  std::mt19937 rng(5);
  HostFp8 h = random_fp8(8, 8, 4, 4, 0, 0, rng);
  std::vector<float> x(8), out(8);
  h.v.scale_cols = 1;  // 8 inputs need 2 block columns of 4
  EXPECT_THROW(cpu::matmul_fp8(x.data(), 1, h.v, nullptr, out.data(), {}), Error);
  h.v.scale_cols = 2;
  h.v.row_offset = 4;  // an offset must lie inside the first block
  EXPECT_THROW(cpu::matmul_fp8(x.data(), 1, h.v, nullptr, out.data(), {}), Error);
}

}  // namespace
}  // namespace qmpi
