#include "bench/kernel_bench_int4.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "core/dtype.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_int4.h"

namespace qmpi::bench {
namespace {

constexpr int64_t kGroup = 128;

// One projection in both forms: int4 arrays as the CPU backend lays them out (random words and
// zeros, so written straight into Blocks16 order), and bf16 weights.
struct Proj {
  int64_t rows, cols;
  std::vector<uint32_t> qweight;
  std::vector<uint16_t> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> group_words, x_index;
  cpu::AlignedArray<uint16_t> bf16;

  Int4WeightView int4() const {
    return {.qweight = qweight.data(),
            .scales = scales.data(),
            .zeros = zeros.data(),
            .group_words = group_words.data(),
            .x_index = x_index.empty() ? nullptr : x_index.data(),
            .rows = rows,
            .words = cols / 8,
            .groups = cols / kGroup,
            .in_features = cols,
            .layout = Int4Layout::Blocks16};
  }
  size_t int4_bytes() const {
    return qweight.size() * 4 + scales.size() * 2 + zeros.size() + x_index.size() * 4;
  }
};

Proj make_proj(int64_t rows, int64_t cols, bool act_order, std::mt19937& rng) {
  Proj p{rows, cols, {}, {}, {}, {}, {}, cpu::make_aligned<uint16_t>(size_t(rows * cols))};
  std::uniform_int_distribution<uint32_t> word;
  std::uniform_int_distribution<int> zero(0, 15);
  p.qweight.resize(size_t(rows * cols / 8));
  for (auto& q : p.qweight) q = word(rng);
  const int64_t groups = cols / kGroup;
  p.scales.assign(size_t(rows * groups), f32_to_f16(0.01f));
  p.zeros.resize(size_t(rows * groups));
  for (auto& z : p.zeros) z = uint8_t(zero(rng));
  for (int64_t g = 0; g <= groups; ++g) p.group_words.push_back(int32_t(g * kGroup / 8));
  if (act_order) {
    p.x_index.resize(size_t(cols));
    std::iota(p.x_index.begin(), p.x_index.end(), 0);
    std::shuffle(p.x_index.begin(), p.x_index.end(), rng);
  }
  for (int64_t i = 0; i < rows * cols; ++i) p.bf16[i] = f32_to_bf16(float(i % 97) * 1e-3f);
  return p;
}

double best(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

}  // namespace

int int4_bench(const std::string& format, int threads, int reps, const std::vector<int64_t>& ns,
               const Timer& timed) {
  if (format != "awq" && format != "gptq-act-order") {
    std::fprintf(stderr, "--int4 takes awq or gptq-act-order, not '%s'\n", format.c_str());
    return 2;
  }
  const int64_t h = 896, kv = 128, im = 4864, layers = 24;
  std::mt19937 rng(1);
  std::vector<Proj> projs;
  for (int l = 0; l < layers; ++l)
    for (auto [r, c] : {std::pair{h, h}, {kv, h}, {kv, h}, {h, h}, {im, h}, {im, h}, {h, im}})
      projs.push_back(make_proj(r, c, format != "awq", rng));
  size_t int4_bytes = 0, bf16_bytes = 0;
  for (const Proj& p : projs)
    int4_bytes += p.int4_bytes(), bf16_bytes += size_t(p.rows * p.cols) * 2;
  const int64_t maxn = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(size_t(maxn * im), 0.01f), out(size_t(maxn * im));
  const cpu::MatmulOptions opt{threads, false};
  for (int64_t n : ns) {
    std::vector<double> q_s, q_cpu, b_s, b_cpu;
    for (int r = 0; r < reps + 1; ++r) {  // alternating; the first repetition warms up
      const auto [qs, qc] = timed([&] {
        for (const Proj& p : projs)
          cpu::matmul_int4(x.data(), n, p.int4(), nullptr, out.data(), opt);
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
          "\"weight_bytes\": %zu, \"pass_ms_min\": %.2f, \"pass_cpu_ms_min\": %.2f, "
          "\"weight_gb_s_best\": %.2f, \"weight_gb_per_cpu_s\": %.2f, \"gflops_best\": %.1f}\n",
          (long long)n, dtype, threads, bytes, best(s) * 1e3, best(c) * 1e3,
          double(bytes) / best(s) / 1e9, double(bytes) / best(c) / 1e9, flops / best(s) / 1e9);
    };
    line(format == "awq" ? "int4-awq-g128" : "int4-gptq-g128-act-order", int4_bytes, q_s, q_cpu);
    line("bf16", bf16_bytes, b_s, b_cpu);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace qmpi::bench
