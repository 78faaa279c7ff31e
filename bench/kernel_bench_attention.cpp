#include "bench/kernel_bench_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/host_pages.h"

namespace qmpi::bench {
namespace {

constexpr int32_t kHeads = 14, kKvHeads = 2, kHeadDim = 64, kBlock = 16, kLayers = 24;

// One layer's K and V pools holding `ctx` tokens in blocks 0, 1, ... (as a fresh cache hands
// them out), random values in the cache's dtype; fp8 gets one scale per (token, KV head).
struct Pages {
  size_t bytes = 0;
  uint8_t* p = nullptr;
  explicit Pages(size_t n, bool huge) : bytes(n), p(static_cast<uint8_t*>(cpu::map_host_pages(n))) {
    if (!p) throw std::bad_alloc();
    if (huge) cpu::advise_huge_pages(p, n);
  }
  Pages(Pages&& o) noexcept : bytes(o.bytes), p(std::exchange(o.p, nullptr)) {}
  ~Pages() {
    if (p) cpu::unmap_host_pages(p, bytes);
  }
  uint8_t* get() const { return p; }
};

struct Layer {
  Pages k, v;
  std::vector<float> k_scale, v_scale;
  KvLayerView view;
};

Layer make_layer(int64_t ctx, DType dt, bool huge, std::mt19937& rng) {
  const int64_t blocks = (ctx + kBlock - 1) / kBlock;
  const int64_t elems = blocks * kBlock * kKvHeads * kHeadDim;
  const size_t bytes = size_t(elems) * dtype_size(dt);
  Layer l{Pages(bytes, huge), Pages(bytes, huge), {}, {}, {}};
  // A pool of random elements repeated with a period of 65537 (no row repeats its neighbours):
  // drawing each of 24 x 8M elements costs more than the bench.
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> code(0, 0xfe);
  std::vector<uint32_t> pool(65537);
  for (uint32_t& e : pool) {
    const float f = g(rng);
    const int c = code(rng);
    if (dt == DType::F32) std::memcpy(&e, &f, 4);
    if (dt == DType::BF16) e = f32_to_bf16(f);
    if (dt == DType::F8_E4M3) e = uint32_t((c & 0x7f) == 0x7f ? c - 1 : c);  // no NaN codes
  }
  for (uint8_t* p : {l.k.get(), l.v.get()})
    for (int64_t i = 0; i < elems; ++i) {
      const uint32_t e = pool[size_t(i % 65537)];
      if (dt == DType::F32) reinterpret_cast<uint32_t*>(p)[i] = e;
      if (dt == DType::BF16) reinterpret_cast<uint16_t*>(p)[i] = uint16_t(e);
      if (dt == DType::F8_E4M3) p[i] = uint8_t(e);
    }
  l.view = {l.k.get(), l.v.get(), blocks, kBlock, kKvHeads, kHeadDim, dt};
  if (dt == DType::F8_E4M3) {
    l.k_scale.assign(size_t(blocks * kBlock * kKvHeads), 1.0f / 448);
    l.v_scale = l.k_scale;
    l.view.k_scale = l.k_scale.data();
    l.view.v_scale = l.v_scale.data();
  }
  return l;
}

DType kv_dtype_of(const std::string& s) {
  return s == "f32" ? DType::F32 : s == "fp8" ? DType::F8_E4M3 : DType::BF16;
}

}  // namespace

int attention_bench(const std::vector<int64_t>& contexts, const std::vector<std::string>& kv_dtypes,
                    int threads, int reps, bool huge, const Timer& timed) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> q(size_t(kHeads) * kHeadDim), out(q.size());
  for (float& x : q) x = g(rng);
  for (const std::string& name : kv_dtypes)
    for (int64_t ctx : contexts) {
      const DType dt = kv_dtype_of(name);
      std::vector<Layer> layers;
      for (int i = 0; i < kLayers; ++i) layers.push_back(make_layer(ctx, dt, huge, rng));
      std::vector<int32_t> table(size_t((ctx + kBlock - 1) / kBlock));
      for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
      const AttentionSeq seq{0, 1, int32_t(ctx), 0};
      const AttentionBatch b{
          &seq, 1, table.data(), kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(float(kHeadDim))};
      // K and V of every token and KV head, plus fp8's two scales per vector.
      const double bytes = double(ctx) * kKvHeads *
                           (2.0 * kHeadDim * dtype_size(dt) + (dt == DType::F8_E4M3 ? 8 : 0));
      std::vector<double> wall[2], cpu[2];
      for (int r = 0; r < reps + 1; ++r)  // the first repetition warms up and is dropped
        for (int path = 0; path < 2; ++path) {
          const auto [s, c] = timed([&] {
            for (const Layer& l : layers)
              cpu::attention(q.data(), b, l.view, out.data(), threads, path == 1);
          });
          if (r > 0) wall[path].push_back(s / kLayers), cpu[path].push_back(c / kLayers);
        }
      for (int path = 0; path < 2; ++path) {
        std::sort(wall[path].begin(), wall[path].end());
        const double best = wall[path][0], med = wall[path][wall[path].size() / 2];
        const double best_cpu = *std::min_element(cpu[path].begin(), cpu[path].end());
        std::printf(
            "{\"attention\": \"decode\", \"context\": %lld, \"kv_dtype\": \"%s\", \"path\": "
            "\"%s\", "
            "\"threads\": %d, \"huge_pages\": %s, \"kv_bytes\": %.0f, \"layer_ms_min\": %.3f, "
            "\"layer_ms_median\": %.3f, \"layer_cpu_ms_min\": %.3f, \"kv_gb_s_best\": %.2f}\n",
            (long long)ctx, name.c_str(), path ? "bf16" : "exact", threads, huge ? "true" : "false",
            bytes, best * 1e3, med * 1e3, best_cpu * 1e3, bytes / best / 1e9);
      }
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace qmpi::bench
