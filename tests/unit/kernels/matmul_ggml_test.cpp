// The GGUF matmul against its float64 reference for every weight type: 1 to 64 output rows (odd
// counts included), several blocks per row, 1 to 40 rows of x, a bias, a TP column slice (rows
// further apart than their blocks), and the Backend seam; and its refusals.
#include "kernels/cpu/matmul_ggml.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "core/errors.h"
#include "kernel_test_util.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/ggml_dequant.h"
#include "tests/unit/kernels/ggml_test_util.h"

namespace qmpi {
namespace {

using test::HostGgml;
using test::kGgmlTypes;
using test::max_rel_err;
using test::random_floats;
using test::random_ggml;

using Path = void (*)(const float*, int64_t, const GgmlWeightView&, const WeightView*, float*,
                      const cpu::MatmulOptions&);

std::vector<float> run_ggml(const GgmlWeightView& w, const std::vector<float>& x, int64_t n,
                            const WeightView* bias, int threads, Path path = cpu::matmul_ggml) {
  std::vector<float> out(size_t(n * w.rows), -1.0f);
  path(x.data(), n, w, bias, out.data(), {threads, false});
  return out;
}

std::vector<float> reference(const GgmlWeightView& w, const std::vector<float>& x, int64_t n,
                             const WeightView* bias) {
  std::vector<float> out(size_t(n * w.rows), -2.0f);
  cpu::matmul_ggml_reference(x.data(), n, w, bias, out.data());
  return out;
}

std::string type_name(GgmlType t) {
  return std::string(ggml_type_info(uint32_t(t))->name);
}

// matmul_ggml picks the GEMV up to kGemvMaxRows rows of x and the blocked path above; each path
// also runs on its own across the line (the GEMV takes tokens 8 at a time, the panel GEMM 12).
TEST(MatmulGgml, EveryPathAndTypeMatchesTheReferenceOverShapes) {
  std::mt19937 rng(35);
  const std::pair<const char*, Path> paths[] = {{"matmul_ggml", cpu::matmul_ggml},
                                                {"gemv", cpu::matmul_ggml_gemv},
                                                {"blocked", cpu::matmul_ggml_blocked},
                                                {"plain", cpu::matmul_ggml_plain}};
  for (GgmlType t : kGgmlTypes) {
    const int64_t be = ggml_type_info(uint32_t(t))->block_elems;
    // Several blocks per row; 9 x 32 puts a partial kColumn (256) panel after a whole one.
    const int64_t cols = be == 256 ? 3 * 256 : be == 32 ? 9 * 32 : 300;
    for (int64_t rows : {1, 2, 7, 33, 64})
      for (int64_t n : {1, 3, 8, 9, 17, 40}) {
        const HostGgml h = random_ggml(t, rows, cols, rng);
        const std::vector<float> x = random_floats(size_t(n * cols), rng);
        const std::vector<float> want = reference(h.v, x, n, nullptr);
        for (const auto& [name, path] : paths)
          EXPECT_LT(max_rel_err(run_ggml(h.v, x, n, nullptr, 2, path), want), 2e-5)
              << type_name(t) << " " << name << " rows " << rows << " n " << n;
      }
  }
}

TEST(MatmulGgml, BiasAndAColumnSliceOfWholeBlocks) {
  std::mt19937 rng(7);
  for (GgmlType t : kGgmlTypes) {
    const GgmlTypeInfo& info = *ggml_type_info(uint32_t(t));
    const int64_t be = info.block_elems == 1 ? 32 : info.block_elems;
    // A TP rank's share of inputs: blocks 1 and 2 of 4, rows as far apart as the full matrix.
    const HostGgml full = random_ggml(t, 9, 4 * be, rng);
    GgmlWeightView slice = full.v;
    slice.data += ggml_bytes(info, be);
    slice.cols = 2 * be;
    const std::vector<float> bias_v = random_floats(9, rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, 9, nullptr};
    const std::vector<float> x = random_floats(size_t(5 * slice.cols), rng);
    const std::vector<float> got = run_ggml(slice, x, 5, &bias, 1);
    EXPECT_LT(max_rel_err(got, reference(slice, x, 5, &bias)), 2e-5) << type_name(t);
    EXPECT_LT(max_rel_err(run_ggml(slice, x, 5, &bias, 2, cpu::matmul_ggml_blocked),
                          reference(slice, x, 5, &bias)),
              2e-5)
        << type_name(t) << " blocked";
    // The slice is the full matrix times x padded with zeros outside it.
    std::vector<float> padded(size_t(5 * full.v.cols), 0.0f);
    for (int i = 0; i < 5; ++i)
      std::memcpy(&padded[size_t(i * full.v.cols + be)], &x[size_t(i * slice.cols)],
                  size_t(slice.cols) * 4);
    EXPECT_LT(max_rel_err(got, reference(full.v, padded, 5, &bias)), 2e-5) << type_name(t);
  }
}

// With bf16 activations the prefill of Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K and Q6_K runs
// the bf16 GEMM's tiles on their integer quants, scaling each block's partial sums (Q6_K's 16
// weights, the others' 32) and (types with a min) subtracting the mins times the blocks' sums of
// x: the reference on x rounded to bf16 up to float32 sums, for 17 to 70 rows of x (the scaled
// tiles on full and half panels and the half panels' per-block tiles), odd output rows, a bias
// and a TP slice of whole blocks. matmul_ggml takes it above the GEMV's rows; the 2- and 3-bit
// k-quants (and CPUs without VDPBF16PS) keep the float panels.
TEST(MatmulGgml, Bf16ActivationPrefillMatchesReferenceOnRoundedInput) {
  std::mt19937 rng(41);
  for (GgmlType t : kGgmlTypes) {
    const GgmlTypeInfo& info = *ggml_type_info(uint32_t(t));
    if (info.block_elems == 1) continue;  // plain floats: the dense kernels
    const bool tiles = cpu::kHaveBf16Dot && t != GgmlType::Q2_K && t != GgmlType::Q3_K;
    const int64_t be = info.block_elems;
    const HostGgml full = random_ggml(t, 37, (be == 256 ? 4 : 12) * be, rng);  // tiles of 32, 5
    GgmlWeightView slice = full.v;  // a TP share: whole blocks from the second on
    slice.data += info.block_bytes;
    slice.cols = (be == 256 ? 2 : 9) * be;
    const std::vector<float> bias_v = random_floats(37, rng);
    const WeightView bias{bias_v.data(), DType::F32, 1, 37, nullptr};
    for (const GgmlWeightView& w : {full.v, slice})
      for (int64_t n : {17, 33, 70}) {
        const std::vector<float> x = random_floats(size_t(n * w.cols), rng);
        std::vector<float> xr(x.size());
        cpu::round_to_bf16(x.data(), int64_t(x.size()), xr.data());
        const std::vector<float> exact = reference(w, x, n, &bias);
        const std::vector<float> want = reference(w, tiles ? xr : x, n, &bias);
        const std::string what =
            type_name(t) + " cols " + std::to_string(w.cols) + " n " + std::to_string(n);
        std::vector<float> got(want.size(), -1.0f);
        EXPECT_EQ(cpu::matmul_ggml_blocked_bf16(x.data(), n, w, &bias, got.data(), {2, true}),
                  tiles)
            << what;
        if (tiles) {
          EXPECT_LT(max_rel_err(got, want), 1e-5) << what;
        }
        std::fill(got.begin(), got.end(), -1.0f);  // no output left over from the call above
        cpu::matmul_ggml(x.data(), n, w, &bias, got.data(), {2, true});
        EXPECT_LT(max_rel_err(got, want), tiles ? 1e-5 : 2e-5) << what << " (matmul_ggml)";
        // Against exact activations x's rounding shows, as for bf16 weights.
        if (tiles) {
          EXPECT_GT(max_rel_err(got, exact), 1e-5) << what << " (matmul_ggml)";
        }
        EXPECT_LT(max_rel_err(got, exact), 1e-2) << what << " (matmul_ggml)";
      }
  }
}

TEST(MatmulGgml, ThroughTheCpuBackend) {
  std::mt19937 rng(3);
  const HostGgml h = random_ggml(GgmlType::Q4_K, 5, 512, rng);
  const std::vector<float> x = random_floats(2 * 512, rng);
  CpuBackend be({2, false});
  std::vector<float> out(10);
  be.matmul_ggml(x.data(), 2, h.v, nullptr, out.data());
  EXPECT_LT(max_rel_err(out, reference(h.v, x, 2, nullptr)), 2e-5);
}

// The embedding look-up on a table held in its blocks (a vocab slice starting at row 3 of the
// full vocabulary): each id in the slice gets its row decoded as dequantize_ggml_row decodes it,
// each id outside it zeros, for every type, through the CPU backend at 1 and 2 threads.
TEST(MatmulGgml, EmbeddingDecodesTheRowsOfItsSlice) {
  std::mt19937 rng(17);
  const int64_t rows = 7, cols = 512, offset = 3;
  const std::vector<int32_t> ids = {3, 9, 2, 4, 10, 0, 8, 6};  // 2, 0 below, 10 past the slice
  for (GgmlType t : kGgmlTypes) {
    const HostGgml h = random_ggml(t, rows, cols, rng);
    std::vector<float> want(ids.size() * size_t(cols), 0.0f);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= offset && ids[i] < offset + rows)
        cpu::dequantize_ggml_row(t, h.v.data + (ids[i] - offset) * h.v.row_bytes,
                                 want.data() + i * cols, cols);
    for (int threads : {1, 2}) {
      CpuBackend be({threads, false});
      std::vector<float> got(want.size(), -1.0f);
      be.embedding_ggml(ids.data(), int64_t(ids.size()), h.v, offset, got.data());
      EXPECT_EQ(got, want) << ggml_type_info(uint32_t(t))->name << " threads " << threads;
    }
  }
}

TEST(MatmulGgml, RefusesTypesWithoutKernelsAndPartialBlocks) {
  std::vector<uint8_t> bytes(4096);
  std::vector<float> x(256), out(4);
  GgmlWeightView w{bytes.data(), GgmlType::IQ2_XXS, 1, 256, 66};
  EXPECT_THROW(cpu::matmul_ggml(x.data(), 1, w, nullptr, out.data(), {}), Error);
  w = {bytes.data(), GgmlType::Q4_K, 1, 128, 144};  // half a super-block
  EXPECT_THROW(cpu::matmul_ggml(x.data(), 1, w, nullptr, out.data(), {}), Error);
  w = {bytes.data(), GgmlType::Q8_0, 2, 64, 34};  // rows closer than their two blocks
  EXPECT_THROW(cpu::matmul_ggml(x.data(), 1, w, nullptr, out.data(), {}), Error);
  const WeightView bias{x.data(), DType::F32, 1, 3, nullptr};
  w = {bytes.data(), GgmlType::Q8_0, 2, 64, 68};
  EXPECT_THROW(cpu::matmul_ggml(x.data(), 1, w, &bias, out.data(), {}), Error);
}

}  // namespace
}  // namespace qmpi
