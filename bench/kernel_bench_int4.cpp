#include "bench/kernel_bench_int4.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "bench/kernel_bench_vs_bf16.h"
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

}  // namespace

int int4_bench(const std::string& format, int threads, int reps, const std::vector<int64_t>& ns,
               bool bf16_act, const Timer& timed) {
  if (format != "awq" && format != "gptq-act-order") {
    std::fprintf(stderr, "--int4 takes awq or gptq-act-order, not '%s'\n", format.c_str());
    return 2;
  }
  std::mt19937 rng(1);
  std::vector<Proj> projs;
  for (auto [r, c] : decode_step_shapes()) projs.push_back(make_proj(r, c, format != "awq", rng));
  FormsVsBf16 f;
  f.label = format == "awq" ? "int4-awq-g128" : "int4-gptq-g128-act-order";
  for (const Proj& p : projs)
    f.quant_bytes += p.int4_bytes(), f.bf16_bytes += size_t(p.rows * p.cols) * 2;
  const int64_t maxn = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(size_t(maxn * kDecodeStepWidest), 0.01f),
      out(size_t(maxn * kDecodeStepWidest));
  f.extra_fields = std::string("\"bf16_activations\": ") + (bf16_act ? "true" : "false") + ", ";
  const cpu::MatmulOptions opt{threads, bf16_act};
  f.quant_pass = [&](int64_t n) {
    for (const Proj& p : projs) cpu::matmul_int4(x.data(), n, p.int4(), nullptr, out.data(), opt);
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
