#include "bench/kernel_bench_fp8.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

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

double best(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

}  // namespace

int fp8_bench(int threads, int reps, const std::vector<int64_t>& ns, bool bf16_act,
              const Timer& timed) {
  const int64_t h = 896, kv = 128, im = 4864, layers = 24;
  std::mt19937 rng(1);
  std::vector<Proj> projs;
  for (int l = 0; l < layers; ++l)
    for (auto [r, c] : {std::pair{h, h}, {kv, h}, {kv, h}, {h, h}, {im, h}, {im, h}, {h, im}})
      projs.push_back(make_proj(r, c, rng));
  size_t fp8_bytes = 0, bf16_bytes = 0;
  for (const Proj& p : projs)
    fp8_bytes += size_t(p.rows * p.cols) + p.scales.size() * 4,
        bf16_bytes += size_t(p.rows * p.cols) * 2;
  const int64_t maxn = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(size_t(maxn * im), 0.01f), out(size_t(maxn * im));
  const cpu::MatmulOptions opt{threads, bf16_act};
  for (int64_t n : ns) {
    std::vector<double> q_s, q_cpu, b_s, b_cpu;
    for (int r = 0; r < reps + 1; ++r) {  // the first repetition warms up
      const auto [qs, qc] = timed([&] {
        for (const Proj& p : projs) cpu::matmul_fp8(x.data(), n, p.fp8(), nullptr, out.data(), opt);
      });
      const auto [bs, bc] = timed([&] {
        for (const Proj& p : projs) {
          const WeightView w{p.bf16.get(), DType::BF16, p.rows, p.cols, nullptr};
          cpu::matmul(x.data(), n, w, nullptr, out.data(), opt);
        }
      });
      if (r > 0) q_s.push_back(qs), q_cpu.push_back(qc), b_s.push_back(bs), b_cpu.push_back(bc);
    }
    const double flops = 2.0 * double(bf16_bytes / 2) * double(n);
    const auto line = [&](const char* dtype, size_t bytes, const std::vector<double>& s,
                          const std::vector<double>& c) {
      std::printf(
          "{\"n\": %lld, \"weights\": \"%s\", \"projections_only\": true, \"threads\": %d, "
          "\"bf16_activations\": %s, \"weight_bytes\": %zu, \"pass_ms_min\": %.2f, "
          "\"pass_cpu_ms_min\": %.2f, \"weight_gb_s_best\": %.2f, \"weight_gb_per_cpu_s\": %.2f, "
          "\"gflops_best\": %.1f}\n",
          (long long)n, dtype, threads, bf16_act ? "true" : "false", bytes, best(s) * 1e3,
          best(c) * 1e3, double(bytes) / best(s) / 1e9, double(bytes) / best(c) / 1e9,
          flops / best(s) / 1e9);
    };
    line("fp8-e4m3-b128", fp8_bytes, q_s, q_cpu);
    line("bf16", bf16_bytes, b_s, b_cpu);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace qmpi::bench
