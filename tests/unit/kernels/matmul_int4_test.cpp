// The int4 GEMV and blocked paths against the plain reference, and the reference against a
// dequantization written out by hand, on layouts with uniform groups, a short last group, and
// act-order runs of uneven length padded with x_index -1, with row counts that leave a narrow
// last Blocks16 block.
#include "kernels/cpu/matmul_int4.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/int4_layout.h"

namespace qmpi {
namespace {

using test::max_rel_err;
using test::random_floats;

// An Int4WeightView's arrays in host memory.
struct HostInt4 {
  std::vector<uint32_t> qweight;
  std::vector<uint16_t> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> group_words;
  std::vector<int32_t> x_index;
  int64_t rows = 0, words = 0, in_features = 0;
  Int4Layout layout = Int4Layout::Blocks16;
  int64_t groups() const { return int64_t(group_words.size()) - 1; }
  Int4WeightView view() const {
    return {qweight.data(),
            scales.data(),
            zeros.data(),
            group_words.data(),
            x_index.empty() ? nullptr : x_index.data(),
            rows,
            words,
            groups(),
            in_features,
            layout};
  }
  // The same weight with its Rows arrays laid out as `to`.
  HostInt4 relaid(Int4Layout to) const {
    HostInt4 h = *this;
    h.qweight = int4_relayout(qweight, rows, words, to);
    h.scales = int4_relayout(scales, rows, groups(), to);
    h.zeros = int4_relayout(zeros, rows, groups(), to);
    h.layout = to;
    return h;
  }
};

// `group_words_of` gives each group's word count. With `shuffle`, x_index is a permutation of
// [0, in_features) with a -1 in every word's last slot of an odd group (act-order padding).
HostInt4 random_int4(int64_t rows, const std::vector<int32_t>& group_words_of, bool shuffle,
                     std::mt19937& rng) {
  HostInt4 h;
  h.rows = rows;
  h.group_words.push_back(0);
  for (int32_t w : group_words_of) h.group_words.push_back(h.group_words.back() + w);
  h.words = h.group_words.back();
  const int64_t groups = int64_t(group_words_of.size());
  std::uniform_int_distribution<uint32_t> word;
  std::uniform_int_distribution<int> zero(0, 16);
  std::uniform_real_distribution<float> scale(0.005f, 0.02f);
  h.qweight.resize(size_t(rows * h.words));
  for (auto& q : h.qweight) q = word(rng);
  h.scales.resize(size_t(rows * groups));
  for (auto& s : h.scales) s = f32_to_f16(scale(rng));
  h.zeros.resize(size_t(rows * groups));
  for (auto& z : h.zeros) z = uint8_t(zero(rng));
  const int64_t kp = h.words * 8;
  if (!shuffle) {
    h.in_features = kp;
    return h;
  }
  std::vector<int32_t> slots;  // packed positions that carry an input
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t k = h.group_words[g] * 8; k < h.group_words[g + 1] * 8; ++k)
      if (g % 2 == 0 || k % 8 != 7) slots.push_back(int32_t(k));
  h.in_features = int64_t(slots.size());
  std::vector<int32_t> inputs(slots.size());
  std::iota(inputs.begin(), inputs.end(), 0);
  std::shuffle(inputs.begin(), inputs.end(), rng);
  h.x_index.assign(size_t(kp), -1);
  for (size_t i = 0; i < slots.size(); ++i) h.x_index[slots[i]] = inputs[i];
  return h;
}

// The layouts every path is checked on: row counts that leave a narrow last Blocks16 block, and
// groups (word counts) of these shapes.
struct Layout {
  int64_t rows;
  std::vector<int32_t> groups;
  bool shuffle;
};
const std::vector<Layout> kLayouts = {
    {37, {16, 16, 16}, false},        // group 128
    {24, {4, 4, 4, 4, 4, 4}, false},  // group 32: several groups per vector
    {6, {8, 8, 8}, false},            // group 64: two groups per vector
    {13, {16, 16, 5}, false},         // a short last group (GPTQ's ceil(K / g))
    {29, {3, 17, 1, 9, 0, 6}, true},  // act-order runs, an empty group, padding
    {8, {112}, false},                // group -1: one group of 896 inputs
};

std::vector<float> run(void (*path)(const float*, int64_t, const Int4WeightView&, const WeightView*,
                                    float*, const cpu::MatmulOptions&),
                       const HostInt4& h, const std::vector<float>& x, int64_t n,
                       const WeightView* bias, int threads = 2) {
  std::vector<float> out(size_t(n * h.rows), -1.0f);
  path(x.data(), n, h.view(), bias, out.data(), {threads, false});
  return out;
}

std::vector<float> reference(const HostInt4& h, const std::vector<float>& x, int64_t n,
                             const WeightView* bias) {
  std::vector<float> out(size_t(n * h.rows));
  cpu::matmul_int4_reference(x.data(), n, h.view(), bias, out.data());
  return out;
}

TEST(MatmulInt4, ReferenceDequantizesAsTheLayoutSays) {
  std::mt19937 rng(1);
  // Two rows, two groups of one word each: input k of group g is nibble k % 8 of word g.
  HostInt4 h = random_int4(2, {1, 1}, false, rng);
  h.layout = Int4Layout::Rows;
  h.qweight = {0x76543210u, 0xfedcba98u, 0x00000000u, 0xffffffffu};
  h.zeros = {8, 0, 16, 15};
  h.scales = {f32_to_f16(0.5f), f32_to_f16(2.0f), f32_to_f16(1.0f), f32_to_f16(0.25f)};
  std::vector<float> x(16, 0.0f);
  x[3] = 1.0f;   // row 0: (3 - 8) * 0.5; row 1: (0 - 16) * 1
  x[12] = 1.0f;  // row 0: (12 - 0) * 2;  row 1: (15 - 15) * 0.25
  std::vector<float> out = reference(h, x, 1, nullptr);
  EXPECT_FLOAT_EQ(out[0], -2.5f + 24.0f);
  EXPECT_FLOAT_EQ(out[1], -16.0f);
}

TEST(MatmulInt4, Blocks16HoldsTheSameWeights) {
  std::mt19937 rng(11);
  // 37 rows: two whole blocks and one of 5; act-order so every array is read through x_index.
  HostInt4 rows = random_int4(37, {3, 17, 1, 9}, true, rng);
  rows.layout = Int4Layout::Rows;
  const HostInt4 blocks = rows.relaid(Int4Layout::Blocks16);
  EXPECT_NE(rows.qweight, blocks.qweight);
  EXPECT_EQ(int4_offset(Int4Layout::Blocks16, 37, 4, 33, 2), 32 * 4 + 2 * 5 + 1);
  const int64_t n = 3;
  const std::vector<float> x = random_floats(size_t(n * rows.in_features), rng);
  EXPECT_EQ(reference(rows, x, n, nullptr), reference(blocks, x, n, nullptr));
  std::vector<float> out(size_t(n * rows.rows));
  EXPECT_THROW(cpu::matmul_int4(x.data(), n, rows.view(), nullptr, out.data(), {}), Error);
}

TEST(MatmulInt4, PathsMatchReference) {
  std::mt19937 rng(7);
  for (const Layout& c : kLayouts) {
    const HostInt4 h = random_int4(c.rows, c.groups, c.shuffle, rng);
    const std::vector<float> bias_v = random_floats(size_t(c.rows), rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, c.rows, nullptr};
    // Every tail of the 4-row and 8-row x tiles.
    for (int64_t n : {1, 2, 3, 4, 5, 7, 9, 15, 16, 17, 23, 33, 40, 47, 63, 64, 65}) {
      const std::vector<float> x = random_floats(size_t(n * h.in_features), rng);
      for (const WeightView* b : {static_cast<const WeightView*>(nullptr), &bias})
        for (int threads : {1, 2}) {
          const std::vector<float> want = reference(h, x, n, b);
          const std::string what = "rows " + std::to_string(c.rows) + " words " +
                                   std::to_string(h.words) + " n " + std::to_string(n) +
                                   (b ? " bias" : "") + (c.shuffle ? " act-order" : "") +
                                   " threads " + std::to_string(threads);
          EXPECT_LT(max_rel_err(run(cpu::matmul_int4_gemv, h, x, n, b, threads), want), 2e-6)
              << what;
          EXPECT_LT(max_rel_err(run(cpu::matmul_int4_blocked, h, x, n, b, threads), want), 2e-6)
              << what;
          EXPECT_LT(max_rel_err(run(cpu::matmul_int4, h, x, n, b, threads), want), 2e-6) << what;
        }
    }
  }
}

// With bf16 activations the blocked path runs the bf16 GEMM's tiles on rows decoded to q - z,
// scaling each group's partial sums: it equals the reference on x rounded to bf16 up to float32
// sums. Rows 1..70 cover the GEMM's half panels (a tile per group), its scaled tiles on full and
// half-width panels, and matmul_int4's crossing from the GEMV; the layouts give groups of 4..896
// inputs, chunks of 16 words cut by a group edge, a short last group, act-order runs (gathered x,
// padding, an empty group), zeros up to 16, and row counts that leave a narrow last Blocks16 block
// and tiles straddling two blocks.
TEST(MatmulInt4, Bf16ActivationBlockedPathMatchesReferenceOnRoundedInput) {
  std::mt19937 rng(29);
  for (const Layout& c : kLayouts) {
    HostInt4 h = random_int4(c.rows, c.groups, c.shuffle, rng);
    h.zeros[0] = 16, h.zeros[1] = 0;  // both ends of the zero's range
    const std::vector<float> bias_v = random_floats(size_t(c.rows), rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, c.rows, nullptr};
    for (int64_t n = 1; n <= 70; n += n < 20 ? 1 : 7) {
      const std::vector<float> x = random_floats(size_t(n * h.in_features), rng);
      std::vector<float> xr(x.size());
      cpu::round_to_bf16(x.data(), int64_t(x.size()), xr.data());
      // Where the build has no scaled tiles for int4 (AVX-512 without bf16 dot products, no
      // AVX2) the blocked path is the exact float32 one.
      std::vector<float> probe(size_t(n * h.rows));
      const Int4Target p{h.view(), &bias, probe.data()};
      const bool scaled = cpu::matmul_int4_blocked_bf16(x.data(), n, {&p, 1}, {1, true});
#if defined(__AVX512F__)
      const bool tiles = cpu::kHaveBf16Dot;  // VDPBF16PS
#else
      const bool tiles = cpu::kHaveInt16Dot;  // AVX2's float32 tiles on x rounded to bf16
#endif
      EXPECT_EQ(scaled, tiles);
      const std::vector<float> want = reference(h, scaled ? xr : x, n, &bias),
                               exact = reference(h, x, n, &bias);
      for (int threads : {1, 2}) {
        const std::string what = "rows " + std::to_string(c.rows) + " words " +
                                 std::to_string(h.words) + " n " + std::to_string(n) +
                                 (c.shuffle ? " act-order" : "") + " threads " +
                                 std::to_string(threads);
        std::vector<float> got(want.size(), -1.0f);
        cpu::matmul_int4_blocked(x.data(), n, h.view(), &bias, got.data(), {threads, true});
        EXPECT_LT(max_rel_err(got, want), 2e-6) << what;
        // Against exact activations x's rounding shows (~2^-9 a product, averaging out).
        EXPECT_LT(max_rel_err(got, exact), 1e-2) << what;
        // matmul_int4 runs the int16-activation GEMV up to kInt4GemvInt16MaxRows where it exists
        // (its bound: Int16ActivationGemvWithinItsBound), else these tiles or the float GEMV.
        cpu::matmul_int4(x.data(), n, h.view(), &bias, got.data(), {threads, true});
        std::vector<float> int16(want.size(), -1.0f);
        const Int4Target t{h.view(), &bias, int16.data()};
        if (n <= cpu::kInt4GemvInt16MaxRows &&
            cpu::matmul_int4_gemv_int16(x.data(), n, {&t, 1}, {threads, true}))
          EXPECT_EQ(got, int16) << what << " (matmul_int4)";
        else
          EXPECT_LT(max_rel_err(got, exact), 1e-2) << what << " (matmul_int4)";
      }
    }
  }
}

// The int16-activation GEMV (matmul_int4_int16.cpp) against the float64 product of the same
// weights: every output within the bound its header states, sum over segments of
// max|x_seg| / (2 kInt4ActivationLevels) * sum |w| over the segment, plus float32 rounding (1e-5 of
// sum |w x|), on the layouts above, x rows with an outlier 100x the rest, and 1..64 rows of x (its
// 2-row tiles and a last single row); and equal, up to float32 rounding, to the product with x
// quantized as stated. Where the build does not use int16 dot products it must say so by returning
// false.
TEST(MatmulInt4, Int16ActivationGemvWithinItsBound) {
  std::mt19937 rng(41);
  double worst = 0.0, worst_emulated = 0.0;
  for (const Layout& c : kLayouts) {
    const HostInt4 h = random_int4(c.rows, c.groups, c.shuffle, rng);
    const Int4WeightView v = h.view();
    const int64_t kp = h.words * 8;
    std::vector<float> wd(size_t(h.rows * kp));
    cpu::dequantize_int4_rows(v, 0, h.rows, wd.data());
    const std::vector<float> bias_v = random_floats(size_t(c.rows), rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, c.rows, nullptr};
    for (int64_t n : {1, 2, 3, 5, 17, 64}) {
      std::vector<float> x = random_floats(size_t(n * h.in_features), rng);
      for (int64_t i = 0; i < n; i += 2)
        x[size_t(i * h.in_features + (i * 7) % h.in_features)] *= 100;
      std::vector<float> xg(size_t(n * kp));
      cpu::gather_int4_input(x.data(), n, v, xg.data());
      for (int threads : {1, 2}) {
        std::vector<float> got(size_t(n * h.rows), -1.0f);
        const Int4Target t{v, &bias, got.data()};
        const bool ran = cpu::matmul_int4_gemv_int16(x.data(), n, {&t, 1}, {threads, true});
        ASSERT_EQ(ran, cpu::kHaveInt16Dot);
        if (!ran) return;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t r = 0; r < h.rows; ++r) {
            double exact = bias_v[size_t(r)], emulated = exact, bound = 0.0, magnitude = 0.0;
            for (int64_t g = 0; g < h.groups(); ++g)
              for (int64_t s = h.group_words[g]; s < h.group_words[g + 1]; s += 16) {
                const int64_t e = std::min<int64_t>(s + 16, h.group_words[g + 1]);
                float amax = 0.0f;
                double wsum = 0.0;
                for (int64_t k = 8 * s; k < 8 * e; ++k) {
                  const double xv = xg[size_t(i * kp + k)], wv = wd[size_t(r * kp + k)];
                  exact += xv * wv;
                  amax = std::max(amax, std::fabs(xg[size_t(i * kp + k)]));
                  wsum += std::fabs(wv);
                  magnitude += std::fabs(xv * wv);
                }
                bound += amax / (2.0 * cpu::kInt4ActivationLevels) * wsum;
                // x as the kernel quantizes it: step max|x| / levels, rounded to nearest even
                const float step = amax / cpu::kInt4ActivationLevels,
                            inv = amax > 0.0f ? cpu::kInt4ActivationLevels / amax : 0.0f;
                for (int64_t k = 8 * s; k < 8 * e; ++k)
                  emulated += double(wd[size_t(r * kp + k)]) * double(step) *
                              std::nearbyint(double(xg[size_t(i * kp + k)] * inv));
              }
            const double g = got[size_t(i * h.rows + r)];
            worst = std::max(worst, std::fabs(g - exact) / (bound + 1e-5 * magnitude + 1e-30));
            worst_emulated = std::max(worst_emulated, std::fabs(g - emulated) / magnitude);
          }
      }
    }
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_LT(worst_emulated, 2e-6);
}

TEST(MatmulInt4, ModelWidthAndThreadCount) {
  std::mt19937 rng(3);
  // qwen2.5-0.5b's down_proj at group 128: 896 outputs, 4864 inputs.
  const HostInt4 h = random_int4(896, std::vector<int32_t>(38, 16), false, rng);
  // 33 and 64: the GEMV's 8-row x tiles with a short last one; 65: the panel GEMM's token blocks.
  for (int64_t n : {1, 2, 33, 64, 65}) {
    const std::vector<float> x = random_floats(size_t(n * h.in_features), rng);
    const std::vector<float> want = reference(h, x, n, nullptr);
    const std::vector<float> one = run(cpu::matmul_int4, h, x, n, nullptr, 1);
    EXPECT_LT(max_rel_err(one, want), 1e-5) << n;  // float32 sums over 4864 inputs
    EXPECT_EQ(one, run(cpu::matmul_int4, h, x, n, nullptr, 2)) << n;
  }
}

// A group (q/k/v, gate/up) gives each target what matmul_int4 alone gives it, to the bit: targets
// that read x alike share one quantized or packed x and one split of their 16-row blocks over the
// threads (row counts that are not multiples of 16 put a short block inside the range), and
// act-order targets, each with its own input order, run one by one.
TEST(MatmulInt4, GroupGivesEachTargetItsOwnProduct) {
  std::mt19937 rng(37);
  // 1536 inputs: enough weights for the GEMV to take 3 threads (kGrain).
  const std::vector<int32_t> g128(12, 16), runs = {3, 17, 1, 9, 0, 6};
  const std::vector<std::vector<HostInt4>> groups = {
      {random_int4(37, g128, false, rng), random_int4(24, g128, false, rng),
       random_int4(70, g128, false, rng)},
      {random_int4(29, runs, true, rng), random_int4(40, runs, true, rng)},
  };
  for (const std::vector<HostInt4>& hs : groups) {
    const int64_t K = hs[0].in_features;
    const std::vector<float> bias_v = random_floats(size_t(hs[0].rows), rng);
    const WeightView bias0{bias_v.data(), DType::F32, 1, hs[0].rows, nullptr};
    for (int64_t n : {1, 3, 8, 16, 24, 25, 40, 70}) {
      const std::vector<float> x = random_floats(size_t(n * K), rng);
      for (bool bf16 : {false, true})
        for (int threads : {1, 2, 3}) {
          std::vector<std::vector<float>> got(hs.size()), alone(hs.size());
          std::vector<Int4Target> targets;
          for (size_t i = 0; i < hs.size(); ++i) {
            const WeightView* b = i == 0 ? &bias0 : nullptr;
            got[i].assign(size_t(n * hs[i].rows), -1.0f);
            alone[i].assign(got[i].size(), -2.0f);
            targets.push_back({hs[i].view(), b, got[i].data()});
            cpu::matmul_int4(x.data(), n, hs[i].view(), b, alone[i].data(), {threads, bf16});
          }
          cpu::matmul_int4_group(x.data(), n, targets, {threads, bf16});
          for (size_t i = 0; i < hs.size(); ++i)
            EXPECT_EQ(got[i], alone[i]) << "target " << i << " of " << hs.size() << " n " << n
                                        << (bf16 ? " bf16" : "") << " threads " << threads;
        }
    }
  }
}

TEST(MatmulInt4, RejectsViewsThatDoNotDescribeTheInput) {
  std::mt19937 rng(5);
  HostInt4 h = random_int4(8, {2}, false, rng);
  h.in_features = 15;  // 16 packed inputs without an x_index
  std::vector<float> x(15), out(8);
  EXPECT_THROW(cpu::matmul_int4(x.data(), 1, h.view(), nullptr, out.data(), {}), Error);
  h.in_features = 16;
  const std::vector<float> short_bias(7);
  const WeightView b{short_bias.data(), DType::F32, 1, 7, nullptr};
  EXPECT_THROW(cpu::matmul_int4(x.data(), 1, h.view(), &b, out.data(), {}), Error);
}

}  // namespace
}  // namespace qmpi
