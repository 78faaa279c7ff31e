// qmpi_kernel_bench: the CPU matmul kernels alone, on the weights one decode step of the
// qwen2.5-0.5b shape streams (24 layers of q, k, v, o, gate, up, down plus the 151936-row
// lm_head: 988 MB in bf16), so that no weight byte is reused from cache between passes. Each
// repetition times one pass of matmul() over all of them with n rows of activations, then a
// plain read of the very same bytes (an integer sum the compiler vectorizes: the STREAM-style
// yardstick), then qmpi's bandwidth probe on a buffer of the same size, back to back, so that
// the ratios survive a host shared with other work. Each pass is timed by the wall clock and
// by the process's CPU time: on a host whose cores are shared with other jobs, the CPU time is
// what the pass would take alone (bytes per CPU-second), the wall time is what it took.
// Prints one JSON line per n with the min and median over repetitions. No model, no engine:
// the numbers are the kernels'. --fused runs each layer's q/k/v and gate/up as one
// matmul_group (as the model does), else every matrix is its own matmul(). --huge-pages puts
// the weights in 2 MiB pages, as the CPU backend does (kernels/cpu/host_pages.h); without it
// they sit in 4 KiB pages, so the two runs show what the TLB costs a pass.
//
// Usage: qmpi_kernel_bench [--threads T] [--reps R] [--rows 1,16] [--dtype bf16|f32]
//                          [--bf16-activations] [--fused] [--huge-pages]
//                          [--int4 awq|gptq-act-order]
//                          [--ggml Q4_K|Q8_0|...] [--fp8]
//                          [--attention [--context 1024,8192] [--kv-dtype bf16,fp8,f32]]
// --int4 times the int4 projections instead, next to their bf16 form (kernel_bench_int4.h);
// --ggml the projections as GGUF blocks of a type (kernel_bench_ggml.h); --fp8 as block-wise
// FP8 (kernel_bench_fp8.h); --attention the decode attention of one layer at each context
// (kernel_bench_attention.h).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernel_bench_attention.h"
#include "bench/kernel_bench_fp8.h"
#include "bench/kernel_bench_ggml.h"
#include "bench/kernel_bench_int4.h"
#include "core/dtype.h"
#include "kernels/cpu/host_pages.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/membw.h"

namespace {

using namespace qmpi;

struct Mat {
  int64_t rows, cols;
  size_t offset;  // bytes into the arena
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "1,16" -> {"1", "16"}
std::vector<std::string> split_commas(const char* v) {
  std::vector<std::string> out;
  for (std::string s = v; !s.empty();) {
    const size_t comma = s.find(',');
    out.push_back(s.substr(0, comma));
    s = comma == std::string::npos ? "" : s.substr(comma + 1);
  }
  return out;
}

double cpu_seconds() {
  return double(std::clock()) / CLOCKS_PER_SEC;
}

// Wall and CPU seconds of f().
template <class F>
std::pair<double, double> timed(F&& f) {
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return {seconds_since(t0), cpu_seconds() - c0};
}

// The plain read: every 8 bytes added once, no intrinsics, no prefetch.
uint64_t plain_read(const char* p, size_t bytes, int threads) {
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  const int64_t n = int64_t(bytes / 8);
  uint64_t s = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += q[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 5;
  bool bf16_act = false, fused = false, huge = false, fp8 = false, attention = false;
  DType dt = DType::BF16;
  std::vector<int64_t> ns{1, 16}, contexts{1024, 8192, 32768};
  std::vector<std::string> kv_dtypes{"bf16"};
  std::string int4, ggml;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--threads")
      threads = std::atoi(v), ++i;
    else if (a == "--reps")
      reps = std::max(1, std::atoi(v)), ++i;
    else if (a == "--dtype")
      dt = std::string(v) == "f32" ? DType::F32 : DType::BF16, ++i;
    else if (a == "--bf16-activations")
      bf16_act = true;
    else if (a == "--fused")
      fused = true;
    else if (a == "--huge-pages")
      huge = true;
    else if (a == "--int4")
      int4 = v, ++i;
    else if (a == "--ggml")
      ggml = v, ++i;
    else if (a == "--fp8")
      fp8 = true;
    else if (a == "--attention")
      attention = true;
    else if (a == "--kv-dtype")
      kv_dtypes = split_commas(v), ++i;
    else if (a == "--rows" || a == "--context") {
      std::vector<int64_t>& list = a == "--rows" ? ns : contexts;
      list.clear();
      for (const std::string& n : split_commas(v)) list.push_back(std::stoll(n));
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--threads T] [--reps R] [--rows 1,16] [--dtype bf16|f32] "
                   "[--bf16-activations] [--fused] [--huge-pages] [--int4 awq|gptq-act-order] "
                   "[--ggml Q4_K|Q8_0|...] [--fp8] "
                   "[--attention [--context 1024,8192] [--kv-dtype bf16,fp8,f32]]\n",
                   argv[0]);
      return 2;
    }
  }
  if (attention)
    return bench::attention_bench(contexts, kv_dtypes, threads, reps, huge,
                                  [](const std::function<void()>& f) { return timed(f); });
  if (!int4.empty())
    return bench::int4_bench(int4, threads, reps, ns, bf16_act,
                             [](const std::function<void()>& f) { return timed(f); });
  if (fp8)
    return bench::fp8_bench(threads, reps, ns, bf16_act,
                            [](const std::function<void()>& f) { return timed(f); });
  if (!ggml.empty())
    return bench::ggml_bench(ggml, threads, reps, ns, bf16_act,
                             [](const std::function<void()>& f) { return timed(f); });
  const int64_t h = 896, kv = 128, im = 4864, vocab = 151936, layers = 24;
  std::vector<std::vector<Mat>> groups;  // the matrices of one matmul call each
  size_t bytes = 0;
  const size_t es = dtype_size(dt);
  auto add = [&](std::initializer_list<std::pair<int64_t, int64_t>> shapes) {
    if (fused) groups.emplace_back();
    for (auto [r, c] : shapes) {
      if (!fused) groups.emplace_back();
      groups.back().push_back({r, c, bytes});
      bytes += (size_t(r * c) * es + 63) / 64 * 64;
    }
  };
  for (int l = 0; l < layers; ++l) {
    add({{h, h}, {kv, h}, {kv, h}}), add({{h, h}}), add({{im, h}, {im, h}}), add({{h, im}});
  }
  add({{vocab, h}});
  const std::unique_ptr<char, std::function<void(char*)>> arena(
      static_cast<char*>(cpu::map_host_pages(bytes)),
      [bytes](char* p) { cpu::unmap_host_pages(p, bytes); });
  if (!arena) return 1;
  if (huge) cpu::advise_huge_pages(arena.get(), bytes);
  // Small random weights (bf16 or f32 of the same values); first touched by the threads that
  // read them in matmul's static split is not guaranteed, which is fine on one socket.
  {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    std::vector<float> pool(1 << 16);
    for (float& f : pool) f = u(rng);
    const size_t count = bytes / es;
    for (size_t i = 0; i < count; ++i) {
      const float f = pool[i & 0xffff];
      if (dt == DType::BF16)
        reinterpret_cast<uint16_t*>(arena.get())[i] = f32_to_bf16(f);
      else
        reinterpret_cast<float*>(arena.get())[i] = f;
    }
  }
  const int64_t maxn = *std::max_element(ns.begin(), ns.end());
  std::vector<float> x(size_t(maxn * im), 0.01f), out(size_t(maxn * vocab));
  const cpu::MatmulOptions opt{threads, bf16_act};

  volatile uint64_t sink = 0;
  for (int64_t n : ns) {
    std::vector<double> pass_s, pass_cpu, read_s, read_cpu, probe_bw;
    for (int r = 0; r < reps + 1; ++r) {  // the first repetition warms up and is dropped
      const auto [s, c] = timed([&] {
        for (const std::vector<Mat>& g : groups) {
          MatmulTarget targets[3];
          float* o = out.data();
          for (size_t i = 0; i < g.size(); ++i) {
            targets[i] = {
                {arena.get() + g[i].offset, dt, g[i].rows, g[i].cols, nullptr}, nullptr, o};
            o += n * g[i].rows;
          }
          if (g.size() == 1)
            cpu::matmul(x.data(), n, targets[0].w, nullptr, targets[0].out, opt);
          else
            cpu::matmul_group(x.data(), n, {targets, g.size()}, opt);
        }
      });
      const auto [rs, rc] = timed([&] { sink = sink + plain_read(arena.get(), bytes, threads); });
      const double bw = cpu::read_bandwidth({bytes, threads, 1});
      if (r > 0) {
        pass_s.push_back(s), pass_cpu.push_back(c), read_s.push_back(rs), read_cpu.push_back(rc);
        probe_bw.push_back(bw);
      }
    }
    const auto gb = [&](double sec) { return double(bytes) / sec / 1e9; };
    const auto mn = [](const std::vector<double>& v) {
      return *std::min_element(v.begin(), v.end());
    };
    std::printf(
        "{\"n\": %lld, \"dtype\": \"%s\", \"threads\": %d, \"bf16_activations\": %s, "
        "\"fused\": %s, \"huge_pages\": %s, "
        "\"weight_bytes\": %zu, \"pass_ms_min\": %.2f, \"pass_ms_median\": %.2f, "
        "\"pass_cpu_ms_min\": %.2f, \"weight_gb_s_best\": %.2f, \"plain_read_gb_s_best\": %.2f, "
        "\"weight_gb_per_cpu_s\": %.2f, \"plain_read_gb_per_cpu_s\": %.2f, "
        "\"probe_gb_s_best\": %.2f, \"probe_gb_s_median\": %.2f, \"gflops_best\": %.1f}\n",
        (long long)n, dt == DType::BF16 ? "bf16" : "f32", threads, bf16_act ? "true" : "false",
        fused ? "true" : "false", huge ? "true" : "false", bytes, mn(pass_s) * 1e3,
        median(pass_s) * 1e3, mn(pass_cpu) * 1e3, gb(mn(pass_s)), gb(mn(read_s)), gb(mn(pass_cpu)),
        gb(mn(read_cpu)), *std::max_element(probe_bw.begin(), probe_bw.end()) / 1e9,
        median(probe_bw) / 1e9, 2.0 * double(bytes / es) * double(n) / mn(pass_s) / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
