// The fused LoRA op (kernels/cpu/lora_delta.h) against a plain float64 reference over the
// weights' stored values: segments of one row, odd widths, ranks 1 to 64, adapters of several
// ranks and dtypes in one call, base-model rows between and around the segments left bit for
// bit as they were, 1 and 2 threads, and the CPU backend's seam. Then the bound that float32
// adapters rounded to bf16 keep (the --dtype auto path), and the errors.
#include "kernels/cpu/lora_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "../expect_error.h"
#include "backend/cpu/cpu_backend.h"
#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/convert.h"

namespace qmpi {
namespace {

using test::HostWeight;

// One adapter: its A, B and scale, and the rows it runs on.
struct Adapter {
  HostWeight a, b;
  float scale;
  std::vector<int32_t> rows;
};

Adapter make_adapter(DType t, int64_t r, int64_t in, int64_t out, std::vector<int32_t> rows,
                     std::mt19937& rng) {
  return {test::random_weight(t, r, in, rng, 0.3f), test::random_weight(t, out, r, rng, 0.3f),
          2.0f / float(r), std::move(rows)};
}

std::vector<LoraSegment> segments_of(const std::vector<Adapter>& adapters, float* out) {
  std::vector<LoraSegment> s;
  for (const Adapter& a : adapters)
    s.push_back({a.a.view(), a.b.view(), a.scale, a.rows.data(), int64_t(a.rows.size()), out});
  return s;
}

double at(const HostWeight& w, int64_t i) {
  return double(cpu::load_as_f32(w.bytes.data(), w.dtype, i));
}

// out0 plus every adapter's scale * B (A x) on its rows, in float64.
std::vector<double> reference(const std::vector<float>& x, int64_t in, int64_t out,
                              const std::vector<float>& out0,
                              const std::vector<Adapter>& adapters) {
  std::vector<double> y(out0.begin(), out0.end());
  for (const Adapter& a : adapters) {
    const int64_t r = a.a.rows;
    for (int32_t row : a.rows) {
      std::vector<double> low(size_t(r), 0.0);
      for (int64_t j = 0; j < r; ++j)
        for (int64_t k = 0; k < in; ++k)
          low[size_t(j)] += at(a.a, j * in + k) * double(x[size_t(row * in + k)]);
      for (int64_t o = 0; o < out; ++o) {
        double d = 0;
        for (int64_t j = 0; j < r; ++j) d += at(a.b, o * r + j) * low[size_t(j)];
        y[size_t(row * out + o)] += double(a.scale) * d;
      }
    }
  }
  return y;
}

struct AdapterSpec {
  DType dtype;
  int64_t rank;
  std::vector<int32_t> rows;
};

struct Case {
  std::string name;
  int64_t n, in, out;
  std::vector<AdapterSpec> adapters;
};

class LoraDeltaKernel : public ::testing::TestWithParam<Case> {};

TEST_P(LoraDeltaKernel, MatchesFloat64AndLeavesOtherRowsAlone) {
  const Case& c = GetParam();
  std::mt19937 rng(17);
  std::vector<Adapter> adapters;
  std::vector<bool> adapted(size_t(c.n), false);
  for (const AdapterSpec& a : c.adapters) {
    adapters.push_back(make_adapter(a.dtype, a.rank, c.in, c.out, a.rows, rng));
    for (int32_t row : a.rows) adapted[size_t(row)] = true;
  }
  const std::vector<float> x = test::random_floats(size_t(c.n * c.in), rng);
  const std::vector<float> out0 = test::random_floats(size_t(c.n * c.out), rng);
  const std::vector<double> want = reference(x, c.in, c.out, out0, adapters);
  for (int threads : {1, 2}) {
    std::vector<float> got = out0;
    cpu::lora_delta(x.data(), c.n, segments_of(adapters, got.data()), threads);
    double worst = 0, largest = 0;
    for (int64_t row = 0; row < c.n; ++row)
      for (int64_t o = 0; o < c.out; ++o) {
        const size_t i = size_t(row * c.out + o);
        if (!adapted[size_t(row)]) {
          ASSERT_EQ(got[i], out0[i]) << "base row " << row << " changed, threads " << threads;
          continue;
        }
        worst = std::max(worst, std::abs(double(got[i]) - want[i]));
        largest = std::max(largest, std::abs(want[i] - double(out0[i])));
      }
    // float32 sums of in + r products: well under 1e-5 of the largest delta.
    EXPECT_LE(worst, 1e-5 * largest) << c.name << ", threads " << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LoraDeltaKernel,
    ::testing::Values(Case{"one_row_rank1", 1, 37, 53, {{DType::F32, 1, {0}}}},
                      Case{"rows_of_one_between_base_rows",
                           7,
                           45,
                           33,
                           {{DType::F32, 3, {1}}, {DType::BF16, 16, {3}}, {DType::F16, 5, {5}}}},
                      Case{"rank17_odd_widths", 9, 131, 77, {{DType::BF16, 17, {0, 2, 3, 4, 8}}}},
                      Case{"rank64", 6, 96, 40, {{DType::F32, 64, {0, 1, 2, 3, 4, 5}}}},
                      Case{"four_adapters_of_four_rows",
                           16,
                           128,
                           200,
                           {{DType::BF16, 16, {0, 4, 8, 12}},
                            {DType::BF16, 16, {1, 5, 9, 13}},
                            {DType::BF16, 8, {2, 6, 10, 14}},
                            {DType::F32, 32, {3, 7, 11, 15}}}},
                      Case{"group_then_base_then_group",
                           12,
                           64,
                           16,
                           {{DType::F16, 2, {0, 1, 2}}, {DType::F32, 33, {7, 8, 9, 10, 11}}}},
                      Case{
                          "wide_rows_many_x_rows",
                          21,
                          1000,
                          300,
                          {{DType::BF16,
                            16,
                            {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}}}}),
    [](const auto& info) { return info.param.name; });

// q/k/v in one call: three outputs of different widths read the same x, two adapters each
// (one adapter on two of them only), every output against its own reference.
TEST(LoraDeltaKernel, ProjectionsOfOneInputInOneCall) {
  std::mt19937 rng(11);
  const int64_t n = 6, in = 80, widths[] = {96, 32, 48};
  const std::vector<float> x = test::random_floats(size_t(n * in), rng);
  std::vector<std::vector<Adapter>> adapters(3);
  std::vector<std::vector<float>> out0, got;
  std::vector<LoraSegment> segs;
  for (int p = 0; p < 3; ++p) {
    adapters[size_t(p)].push_back(make_adapter(DType::BF16, 16, in, widths[p], {0, 3, 5}, rng));
    if (p != 1)
      adapters[size_t(p)].push_back(make_adapter(DType::F32, 7, in, widths[p], {1, 2}, rng));
    out0.push_back(test::random_floats(size_t(n * widths[p]), rng));
    got.push_back(out0.back());
  }
  for (int p = 0; p < 3; ++p)
    for (const LoraSegment& s : segments_of(adapters[size_t(p)], got[size_t(p)].data()))
      segs.push_back(s);
  cpu::lora_delta(x.data(), n, segs, 2);
  for (int p = 0; p < 3; ++p) {
    const std::vector<double> want =
        reference(x, in, widths[p], out0[size_t(p)], adapters[size_t(p)]);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[size_t(p)][i], want[i], 1e-5) << "projection " << p << " element " << i;
    if (p == 1) {  // rows 1, 2 and 4 have no adapter on this projection
      for (int64_t row : {1, 2, 4})
        for (int64_t o = 0; o < widths[p]; ++o)
          ASSERT_EQ(got[1][size_t(row * widths[p] + o)], out0[1][size_t(row * widths[p] + o)]);
    }
  }
}

TEST(LoraDeltaKernel, CpuBackendRunsTheFusedOp) {
  std::mt19937 rng(3);
  const std::vector<Adapter> adapters = {make_adapter(DType::BF16, 8, 40, 24, {1, 2}, rng)};
  const std::vector<float> x = test::random_floats(4 * 40, rng);
  const std::vector<float> out0 = test::random_floats(4 * 24, rng);
  const std::vector<double> want = reference(x, 40, 24, out0, adapters);
  std::vector<float> got = out0;
  CpuBackend be;
  ASSERT_TRUE(be.lora_delta(x.data(), 4, segments_of(adapters, got.data())));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

// float32 adapters held in bf16 (model/lora_loader.h with bf16 activations): each of A and B is
// rounded to nearest with a relative error of at most u = 2^-8, so every output element stays
// within (2u + u^2) * M of the exact delta, M = scale * sum_j |B_oj| sum_k |A_jk x_k|, plus the
// float32 sums' (in + r + 2) * 2^-24 * M.
TEST(LoraDeltaKernel, Bf16AdaptersStayWithinTheRoundingBound) {
  const int64_t n = 5, in = 300, out = 70, r = 16;
  std::mt19937 rng(29);
  Adapter exact = make_adapter(DType::F32, r, in, out, {0, 2, 4}, rng);
  Adapter rounded = exact;
  for (HostWeight* w : {&rounded.a, &rounded.b}) {
    std::vector<uint8_t> bytes(size_t(w->rows * w->cols) * 2);
    for (int64_t i = 0; i < w->rows * w->cols; ++i) {
      const uint16_t h = f32_to_bf16(float(at(*w, i)));
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    w->bytes = std::move(bytes);
    w->dtype = DType::BF16;
  }
  const std::vector<float> x = test::random_floats(size_t(n * in), rng);
  const std::vector<float> zero(size_t(n * out), 0.0f);
  const std::vector<double> want = reference(x, in, out, zero, {exact});
  std::vector<float> got = zero;
  cpu::lora_delta(x.data(), n, segments_of({rounded}, got.data()), 2);
  const double u = std::ldexp(1.0, -8);
  const double rel = 2 * u + u * u + double(in + r + 2) * std::ldexp(1.0, -24);
  double used = 0;  // the largest error as a fraction of its bound
  for (int32_t row : exact.rows)
    for (int64_t o = 0; o < out; ++o) {
      double m = 0;
      for (int64_t j = 0; j < r; ++j) {
        double ax = 0;
        for (int64_t k = 0; k < in; ++k)
          ax += std::abs(at(exact.a, j * in + k) * double(x[size_t(row * in + k)]));
        m += std::abs(at(exact.b, o * r + j)) * ax;
      }
      const size_t i = size_t(row * out + o);
      const double bound = rel * double(exact.scale) * m;
      EXPECT_LE(std::abs(double(got[i]) - want[i]), bound) << "row " << row << " col " << o;
      used = std::max(used, std::abs(double(got[i]) - want[i]) / bound);
    }
  // The rounding shows (the bf16 path is not secretly float32) but stays inside the bound.
  EXPECT_GT(used, 1e-3);
}

TEST(LoraDeltaKernel, ShapesDtypesAndRowsAreChecked) {
  std::mt19937 rng(5);
  std::vector<Adapter> two = {make_adapter(DType::F32, 4, 16, 8, {0}, rng),
                              make_adapter(DType::F32, 4, 17, 8, {1}, rng)};
  std::vector<float> x(2 * 17), out(2 * 8);
  testing::expect_error([&] { cpu::lora_delta(x.data(), 2, segments_of(two, out.data()), 1); },
                        Err::TensorShapeMismatch, {"[4, 17]", "input of 16 columns"});
  std::vector<Adapter> far = {make_adapter(DType::F32, 4, 16, 8, {2}, rng)};
  testing::expect_error([&] { cpu::lora_delta(x.data(), 2, segments_of(far, out.data()), 1); },
                        Err::TensorShapeMismatch, {"row 2", "2 rows"});
  std::vector<Adapter> odd = {make_adapter(DType::F32, 4, 16, 8, {0}, rng)};
  odd[0].a.dtype = DType::I32;
  testing::expect_error([&] { cpu::lora_delta(x.data(), 2, segments_of(odd, out.data()), 1); },
                        Err::DTypeUnsupported, {"LoRA weight"});
}

}  // namespace
}  // namespace qmpi
