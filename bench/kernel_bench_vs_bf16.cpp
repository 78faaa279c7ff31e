#include "bench/kernel_bench_vs_bf16.h"

#include <algorithm>
#include <cstdio>

namespace qmpi::bench {
namespace {

double best(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> decode_step_shapes() {
  const int64_t h = 896, kv = 128, im = kDecodeStepWidest, layers = 24;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int l = 0; l < layers; ++l)
    for (auto rc : {std::pair{h, h}, {kv, h}, {kv, h}, {h, h}, {im, h}, {im, h}, {h, im}})
      shapes.push_back(rc);
  return shapes;
}

void time_against_bf16(const FormsVsBf16& f, int threads, int reps, const std::vector<int64_t>& ns,
                       const Timer& timed) {
  for (int64_t n : ns) {
    std::vector<double> q_s, q_cpu, b_s, b_cpu;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [qs, qc] = timed([&] { f.quant_pass(n); });
      const auto [bs, bc] = timed([&] { f.bf16_pass(n); });
      if (r > 0) q_s.push_back(qs), q_cpu.push_back(qc), b_s.push_back(bs), b_cpu.push_back(bc);
    }
    const double flops = 2.0 * double(f.bf16_bytes / 2) * double(n);
    const auto line = [&](const char* form, size_t bytes, const std::vector<double>& s,
                          const std::vector<double>& c) {
      std::printf(
          "{\"n\": %lld, \"weights\": \"%s\", \"projections_only\": true, \"threads\": %d, "
          "%s\"weight_bytes\": %zu, \"pass_ms_min\": %.2f, \"pass_cpu_ms_min\": %.2f, "
          "\"weight_gb_s_best\": %.2f, \"weight_gb_per_cpu_s\": %.2f, \"gflops_best\": %.1f}\n",
          (long long)n, form, threads, f.extra_fields.c_str(), bytes, best(s) * 1e3, best(c) * 1e3,
          double(bytes) / best(s) / 1e9, double(bytes) / best(c) / 1e9, flops / best(s) / 1e9);
    };
    line(f.label.c_str(), f.quant_bytes, q_s, q_cpu);
    line("bf16", f.bf16_bytes, b_s, b_cpu);
    std::fflush(stdout);
  }
}

}  // namespace qmpi::bench
