// The small ops against their references: rmsnorm, rope, silu_mul, add, embedding,
// gather_rows, kv_store.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kv_store.h"
#include "kernels/cpu/log_sum_exp.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cpu/rope.h"

namespace qmpi {
namespace {

using test::max_rel_err;

TEST(RmsNorm, MatchesReferenceForEveryWeightDtype) {
  std::mt19937 rng(11);
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (int64_t width : {1, 17, 64, 896})
      for (int64_t n : {1, 3, 17}) {
        test::HostWeight w = test::random_weight(t, 1, width, rng);
        std::vector<float> x = test::random_floats(size_t(n * width), rng, 3.0f);
        std::vector<float> want(x.size()), got(x.size());
        cpu::ref::rmsnorm(x.data(), n, w.view(), 1e-6f, want.data());
        cpu::rmsnorm(x.data(), n, w.view(), 1e-6f, got.data(), 2);
        EXPECT_LT(max_rel_err(got, want), 1e-5) << dtype_name(t) << " " << width << " " << n;
        cpu::rmsnorm(x.data(), n, w.view(), 1e-6f, x.data(), 2);  // in place
        EXPECT_EQ(x, got);
      }
}

TEST(RmsNorm, EpsilonKeepsZeroRowsFinite) {
  test::HostWeight w{std::vector<uint8_t>(16), DType::F32, 1, 4};
  const float one = 1.0f;
  for (int i = 0; i < 4; ++i) std::memcpy(w.bytes.data() + 4 * i, &one, 4);
  std::vector<float> x(4, 0.0f), out(4, -1.0f);
  cpu::rmsnorm(x.data(), 1, w.view(), 1e-6f, out.data(), 1);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

// Frequencies spread over the decades RoPE uses (1 down to 1e-6), any order.
std::vector<float> random_inv_freq(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> decade(-6.0f, 0.0f);
  std::vector<float> f(count);
  for (float& v : f) v = std::pow(10.0f, decade(rng));
  return f;
}

TEST(Rope, MatchesReferenceAcrossPositionsAndTableGrowth) {
  std::mt19937 rng(12);
  for (int32_t head_dim : {2, 64, 128})
    for (float attention : {1.0f, 1.1386f}) {
      const std::vector<float> inv = random_inv_freq(size_t(head_dim / 2), rng);
      const RopeFreqs f{inv.data(), 1, head_dim, attention};
      cpu::RopeTable table(f);
      // Small positions first, then ones that make the cached table grow.
      for (std::vector<int32_t> pos :
           {std::vector<int32_t>{0, 1, 2}, {7, 300, 1000, 5}, {32767, 4095, 0}}) {
        const int32_t heads = 3;
        const int64_t n = int64_t(pos.size());
        std::vector<float> x = test::random_floats(size_t(n * heads * head_dim), rng);
        std::vector<float> want = x;
        cpu::ref::rope(want.data(), n, heads, pos.data(), f);
        table.apply(x.data(), n, heads, pos.data(), 2);
        EXPECT_LT(max_rel_err(x, want), 1e-5) << head_dim << " " << attention << " " << pos[0];
      }
    }
}

TEST(Rope, PerTokenRowsMatchReferenceAndTheSharedTableRowByRow) {
  std::mt19937 rng(14);
  const int32_t head_dim = 64, heads = 2;
  const std::vector<int32_t> pos{5, 70000, 131071};
  const int64_t n = int64_t(pos.size());
  const std::vector<float> rows = random_inv_freq(size_t(n * head_dim / 2), rng);
  const RopeFreqs f{rows.data(), n, head_dim, 1.25f};
  const std::vector<float> x = test::random_floats(size_t(n * heads * head_dim), rng);
  std::vector<float> got = x, want = x;
  cpu::rope_per_token(got.data(), n, heads, pos.data(), f, 2);
  cpu::ref::rope(want.data(), n, heads, pos.data(), f);
  EXPECT_LT(max_rel_err(got, want), 1e-5);
  // Token i alone, through a table of its own row, turns the same way.
  for (int64_t i = 0; i < n; ++i) {
    cpu::RopeTable table(RopeFreqs{rows.data() + i * head_dim / 2, 1, head_dim, 1.25f});
    std::vector<float> one(x.begin() + i * heads * head_dim,
                           x.begin() + (i + 1) * heads * head_dim);
    table.apply(one.data(), 1, heads, &pos[size_t(i)], 1);
    for (size_t e = 0; e < one.size(); ++e)
      EXPECT_EQ(one[e], got[size_t(i * heads * head_dim) + e]);
  }
  EXPECT_THROW(cpu::rope_per_token(got.data(), n - 1, heads, pos.data(), f, 1), Error);
}

TEST(Rope, RotatesHalvesByPositionTimesInverseFrequencyTimesAttention) {
  // head_dim 2: one pair (x0, x1) with inv_freq 1, so position p rotates it by p radians.
  const float one = 1.0f;
  cpu::RopeTable table(RopeFreqs{&one, 1, 2, 1.0f});
  std::vector<float> x{1.0f, 0.0f, 0.0f, 2.0f};
  const int32_t pos[2] = {1, 0};
  table.apply(x.data(), 2, 1, pos, 1);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_EQ(x[2], 0.0f);  // position 0 is the identity
  EXPECT_EQ(x[3], 2.0f);
  cpu::RopeTable scaled(RopeFreqs{&one, 1, 2, 1.5f});  // YaRN's factor scales cos and sin
  x = {1.0f, 0.0f};
  scaled.apply(x.data(), 1, 1, pos, 1);
  EXPECT_NEAR(x[0], 1.5 * std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], 1.5 * std::sin(1.0), 1e-6);
}

TEST(Rope, RejectsNegativePositions) {
  const float inv[2] = {1.0f, 0.01f};
  cpu::RopeTable table(RopeFreqs{inv, 1, 4, 1.0f});
  std::vector<float> x(4, 1.0f);
  const int32_t pos = -1;
  EXPECT_THROW(table.apply(x.data(), 1, 1, &pos, 1), Error);
}

TEST(Elementwise, SiluMulAndAddMatchReference) {
  std::mt19937 rng(13);
  for (int64_t count : {1, 15, 16, 17, 1000, 300001}) {
    std::vector<float> g = test::random_floats(size_t(count), rng, 6.0f);
    std::vector<float> u = test::random_floats(size_t(count), rng);
    if (count > 2) {
      g[0] = -120.0f;  // exp(-g) overflows: silu -> -0
      g[1] = 95.0f;
    }
    std::vector<float> want(g.size()), got(g.size());
    cpu::ref::silu_mul(g.data(), u.data(), 1, count, want.data());
    cpu::silu_mul(g.data(), u.data(), 1, count, got.data(), 2);
    EXPECT_LT(max_rel_err(got, want), 1e-6) << count;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_LE(std::fabs(got[i] - want[i]), 2e-6 * std::fabs(want[i]) + 1e-30) << i;

    std::vector<float> a = g, b = g;
    cpu::ref::add(a.data(), u.data(), count);
    cpu::add(b.data(), u.data(), count, 2);
    EXPECT_EQ(a, b);
  }
}

// The sampler's log-probabilities: lengths around the vector width and the 1024-entry runs,
// a vocabulary-sized row, and a row whose entries span a wide range (most exps underflow).
TEST(LogSumExp, MatchesReference) {
  std::mt19937 rng(21);
  for (int64_t n : {1, 15, 16, 17, 1023, 1040, 151936}) {
    std::vector<float> x = test::random_floats(size_t(n), rng);
    for (float& v : x) v *= 12.0f;
    const cpu::LogSumExp got = cpu::log_sum_exp(x.data(), n);
    const double want = cpu::ref::log_sum_exp(x.data(), n);
    EXPECT_NEAR(got.lse, want, 1e-5 * std::max(1.0, std::abs(want))) << "n=" << n;
    EXPECT_EQ(got.max, *std::max_element(x.begin(), x.end())) << "n=" << n;
  }
  std::vector<float> wide{-200.0f, 3.0f, -1e4f, 2.5f, 0.0f};
  EXPECT_NEAR(cpu::log_sum_exp(wide.data(), 5).lse, cpu::ref::log_sum_exp(wide.data(), 5), 1e-6);
  // At a sampling temperature: the log-sum-exp of scale * x, with -inf entries (masked ids).
  for (float scale : {1.0f / 0.7f, 1.0f / 1.3f}) {
    std::vector<float> x = test::random_floats(5000, rng);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = i % 7 == 3 ? -std::numeric_limits<float>::infinity() : x[i] * 12.0f;
    std::vector<float> scaled = x;
    for (float& v : scaled) v *= scale;
    const double want = cpu::ref::log_sum_exp(scaled.data(), 5000);
    EXPECT_NEAR(cpu::log_sum_exp(x.data(), 5000, scale).lse, want, 1e-5 * std::abs(want))
        << "scale " << scale;
  }
}

TEST(Embedding, RowsInsideTheSliceAreWidenedAndOthersAreZero) {
  std::mt19937 rng(14);
  for (DType t : {DType::BF16, DType::F16, DType::F32}) {
    const int64_t rows = 10, width = 37, offset = 20;
    test::HostWeight table = test::random_weight(t, rows, width, rng);
    const std::vector<int32_t> ids{20, 29, 19, 30, 25, -1, 0, 1000, 20};
    const int64_t n = int64_t(ids.size());
    std::vector<float> want(size_t(n * width)), got(want.size(), 7.0f);
    cpu::ref::embedding(ids.data(), n, table.view(), offset, want.data());
    cpu::embedding(ids.data(), n, table.view(), offset, got.data(), 2);
    EXPECT_EQ(got, want) << dtype_name(t);
    for (int64_t i = 0; i < n; ++i) {
      const bool inside = ids[size_t(i)] >= offset && ids[size_t(i)] < offset + rows;
      float mag = 0;
      for (int64_t c = 0; c < width; ++c) mag += std::fabs(got[size_t(i * width + c)]);
      EXPECT_EQ(mag == 0.0f, !inside) << "id " << ids[size_t(i)];
    }
  }
}

TEST(GatherRows, CopiesTheNamedRows) {
  std::mt19937 rng(15);
  std::vector<float> src = test::random_floats(6 * 5, rng);
  const std::vector<int32_t> rows{5, 0, 5, 2};
  std::vector<float> want(4 * 5), got(4 * 5);
  cpu::ref::gather_rows(src.data(), rows.data(), 4, 5, want.data());
  cpu::gather_rows(src.data(), rows.data(), 4, 5, got.data());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got[0], src[25]);
}

TEST(ScatterAddRows, AddsScaledRowsIntoTheNamedRows) {
  std::mt19937 rng(17);
  const std::vector<float> src = test::random_floats(3 * 5, rng);
  std::vector<float> want = test::random_floats(6 * 5, rng), got = want;
  const std::vector<int32_t> rows{4, 0, 2};
  const std::vector<float> scales{0.5f, -2.0f, 0.0f};
  cpu::ref::scatter_add_rows(src.data(), rows.data(), scales.data(), 3, 5, want.data());
  cpu::scatter_add_rows(src.data(), rows.data(), scales.data(), 3, 5, got.data());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
  // Rows not named are untouched; a zero scale adds nothing.
  std::vector<float> base(6 * 5, 1.0f), out = base;
  cpu::scatter_add_rows(src.data(), rows.data(), scales.data(), 3, 5, out.data());
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(out[size_t(5 + c)], 1.0f);                                 // row 1
    EXPECT_EQ(out[size_t(10 + c)], 1.0f);                                // row 2, scale 0
    EXPECT_FLOAT_EQ(out[size_t(20 + c)], 1.0f + 0.5f * src[size_t(c)]);  // row 4
  }
}

TEST(KvStore, WritesSlotsAndRejectsSlotsOutsideThePool) {
  std::mt19937 rng(16);
  const int64_t blocks = 3;
  const int32_t bs = 4, kvh = 2, d = 8;
  const int64_t pool = blocks * bs * kvh * d;
  std::vector<float> k1(size_t(pool), 0.0f), v1 = k1, k2 = k1, v2 = k1;
  const KvLayerView ref{k1.data(), v1.data(), blocks, bs, kvh, d};
  const KvLayerView opt{k2.data(), v2.data(), blocks, bs, kvh, d};
  const std::vector<int32_t> slots{11, 0, 5, 6};
  std::vector<float> k = test::random_floats(size_t(4 * kvh * d), rng);
  std::vector<float> v = test::random_floats(k.size(), rng);
  cpu::ref::kv_store(k.data(), v.data(), 4, slots.data(), ref);
  cpu::kv_store(k.data(), v.data(), 4, slots.data(), opt);
  EXPECT_EQ(k1, k2);
  EXPECT_EQ(v1, v2);
  EXPECT_EQ(k2[size_t(11 * kvh * d)], k[0]);
  const int32_t bad = 12;
  try {
    cpu::kv_store(k.data(), v.data(), 1, &bad, opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::Internal);
  }
}

}  // namespace
}  // namespace qmpi
