#include "bench/kernel_bench_fp8.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "bench/kernel_bench_vs_bf16.h"
#include "core/dtype.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_fp8.h"

namespace qmpi::bench {
namespace {

constexpr int64_t kBlock = 128;

// One projection in both forms: random finite e4m3 codes with block scales, and bf16 weights.
struct Proj {
  int64_t rows, cols;
  cpu::AlignedArray<uint8_t> q;
  std::vector<float> scales;
  cpu::AlignedArray<uint16_t> bf16;

  Fp8WeightView fp8() const {
    const int64_t sr = (rows + kBlock - 1) / kBlock, sc = (cols + kBlock - 1) / kBlock;
    return {q.get(), scales.data(), rows, cols, sr, sc, kBlock, kBlock, 0, 0};
  }
};

Proj make_proj(int64_t rows, int64_t cols, std::mt19937& rng) {
  Proj p{rows,
         cols,
         cpu::make_aligned<uint8_t>(size_t(rows * cols)),
         {},
         cpu::make_aligned<uint16_t>(size_t(rows * cols))};
  std::uniform_int_distribution<int> code(0, 0x7e);
  for (int64_t i = 0; i < rows * cols; ++i) p.q[i] = uint8_t(code(rng) | (i & 1) << 7);
  p.scales.assign(size_t(((rows + kBlock - 1) / kBlock) * ((cols + kBlock - 1) / kBlock)), 1e-3f);
  for (int64_t i = 0; i < rows * cols; ++i) p.bf16[i] = f32_to_bf16(float(i % 97) * 1e-3f);
  return p;
}

}  // namespace

int fp8_bench(int threads, int reps, const std::vector<int64_t>& ns, bool bf16_act,
              const Timer& timed) {
  std::mt19937 rng(1);
  std::vector<Proj> projs;
  for (auto [r, c] : decode_step_shapes()) projs.push_back(make_proj(r, c, rng));
  FormsVsBf16 f;
  f.label = "fp8-e4m3-b128";
  for (const Proj& p : projs)
    f.quant_bytes += size_t(p.rows * p.cols) + p.scales.size() * 4,
        f.bf16_bytes += size_t(p.rows * p.cols) * 2;
  f.extra_fields = std::string("\"bf16_activations\": ") + (bf16_act ? "true" : "false") + ", ";
  const int64_t maxn = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(size_t(maxn * kDecodeStepWidest), 0.01f),
      out(size_t(maxn * kDecodeStepWidest));
  const cpu::MatmulOptions opt{threads, bf16_act};
  f.quant_pass = [&](int64_t n) {
    for (const Proj& p : projs) cpu::matmul_fp8(x.data(), n, p.fp8(), nullptr, out.data(), opt);
  };
  f.bf16_pass = [&](int64_t n) {
    for (const Proj& p : projs) {
      const WeightView w{p.bf16.get(), DType::BF16, p.rows, p.cols, nullptr};
      cpu::matmul(x.data(), n, w, nullptr, out.data(), opt);
    }
  };
  time_against_bf16(f, threads, reps, ns, timed);
  return 0;
}

}  // namespace qmpi::bench
