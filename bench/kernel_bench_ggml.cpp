#include "bench/kernel_bench_ggml.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <utility>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "kernels/cpu/aligned.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_ggml.h"

namespace qmpi::bench {
namespace {

struct Proj {
  GgmlWeightView ggml;
  WeightView bf16;
};

const GgmlTypeInfo* type_named(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeInfo* t = ggml_type_info(id);
    if (t && t->weights && t->name == name) return t;
  }
  return nullptr;
}

// llama-quantize's fallback for rows that are not whole 256-element blocks.
const GgmlTypeInfo* fitting(const GgmlTypeInfo* t, int64_t cols) {
  if (cols % t->block_elems == 0) return t;
  static const std::map<std::string_view, std::string> fallback{
      {"Q4_K", "Q5_0"}, {"Q5_K", "Q5_1"}, {"Q6_K", "Q8_0"}, {"Q2_K", "Q4_0"}, {"Q3_K", "Q4_0"}};
  return type_named(fallback.at(t->name));
}

double best(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

}  // namespace

int ggml_bench(const std::string& type, int threads, int reps, const std::vector<int64_t>& ns,
               bool reduced, const Timer& timed) {
  const GgmlTypeInfo* main_type = type_named(type);
  if (!main_type || main_type->block_elems == 1) {
    std::fprintf(stderr, "--ggml takes a quantized GGUF type (%s), not '%s'\n",
                 std::string(ggml_weight_type_names()).c_str(), type.c_str());
    return 2;
  }
  const int64_t h = 896, kv = 128, im = 4864, layers = 24;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int l = 0; l < layers; ++l)
    for (auto s : {std::pair{h, h}, {kv, h}, {kv, h}, {h, h}, {im, h}, {im, h}, {h, im}})
      shapes.push_back(s);
  size_t ggml_bytes_total = 0, bf16_bytes = 0;
  std::map<std::string_view, int> mix;
  for (auto [r, c] : shapes) {
    const GgmlTypeInfo* t = fitting(main_type, c);
    ggml_bytes_total += size_t(r * ggml_bytes(*t, c));
    bf16_bytes += size_t(r * c) * 2;
    ++mix[t->name];
  }
  // Every 16-bit word a finite f16 in [-1, 1], so whatever bytes a block reads as its scales are
  // sane; the decoders' work does not depend on the values.
  cpu::AlignedArray<uint16_t> q = cpu::make_aligned<uint16_t>(ggml_bytes_total / 2 + 32);
  cpu::AlignedArray<uint16_t> bf = cpu::make_aligned<uint16_t>(bf16_bytes / 2);
  {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < ggml_bytes_total / 2 + 32; ++i) q[i] = f32_to_f16(u(rng));
    for (size_t i = 0; i < bf16_bytes / 2; ++i) bf[i] = f32_to_bf16(0.05f * u(rng));
  }
  std::vector<Proj> projs;
  size_t qo = 0, bo = 0;
  for (auto [r, c] : shapes) {
    const GgmlTypeInfo* t = fitting(main_type, c);
    const auto* base = reinterpret_cast<const uint8_t*>(q.get());
    projs.push_back({{base + qo, t->type, r, c, ggml_bytes(*t, c)},
                     {bf.get() + bo, DType::BF16, r, c, nullptr}});
    qo += size_t(r * ggml_bytes(*t, c)), bo += size_t(r * c);
  }
  std::string mix_text;
  for (auto [name, count] : mix)
    mix_text += (mix_text.empty() ? "" : ", ") + std::string(name) + " x" + std::to_string(count);
  const int64_t maxn = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(size_t(maxn * im), 0.01f), out(size_t(maxn * im));
  const cpu::MatmulOptions opt{threads, reduced};
  for (int64_t n : ns) {
    std::vector<double> q_s, q_cpu, b_s, b_cpu;
    for (int r = 0; r < reps + 1; ++r) {  // alternating; the first repetition warms up
      const auto [qs, qc] = timed([&] {
        for (const Proj& p : projs) cpu::matmul_ggml(x.data(), n, p.ggml, nullptr, out.data(), opt);
      });
      const auto [bs, bc] = timed([&] {
        for (const Proj& p : projs) cpu::matmul(x.data(), n, p.bf16, nullptr, out.data(), opt);
      });
      if (r > 0) q_s.push_back(qs), q_cpu.push_back(qc), b_s.push_back(bs), b_cpu.push_back(bc);
    }
    const double flops = 2.0 * double(bf16_bytes / 2) * double(n);
    const auto line = [&](const std::string& weights, size_t bytes, const std::vector<double>& s,
                          const std::vector<double>& c) {
      std::printf(
          "{\"n\": %lld, \"weights\": \"%s\", \"projections_only\": true, \"threads\": %d, "
          "\"bf16_activations\": %s, "
          "\"weight_bytes\": %zu, \"pass_ms_min\": %.2f, \"pass_cpu_ms_min\": %.2f, "
          "\"weight_gb_s_best\": %.2f, \"weight_gb_per_cpu_s\": %.2f, \"gflops_best\": %.1f}\n",
          (long long)n, weights.c_str(), threads, reduced ? "true" : "false", bytes, best(s) * 1e3,
          best(c) * 1e3, double(bytes) / best(s) / 1e9, double(bytes) / best(c) / 1e9,
          flops / best(s) / 1e9);
    };
    line("gguf " + mix_text, ggml_bytes_total, q_s, q_cpu);
    line("bf16", bf16_bytes, b_s, b_cpu);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace qmpi::bench
