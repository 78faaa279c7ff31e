#include "kernels/cpu/lora_delta.h"

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// Below this many adapter elements per thread, a second thread costs more than it brings (as
// the GEMV's grain).
constexpr int64_t kGrain = 32 * 1024;
// Phase 1 computes kARows rows of A against kXRows rows of x at a time (16 accumulators of
// AVX-512's 32 registers, 8 of AVX2's 16). Phase 2 adds kTile output columns of a row at a time:
// one vector of float32.
constexpr int64_t kARows = 4;
#if defined(QMPI_CPU_VEC)
constexpr int64_t kXRows = vec::kLanes == 16 ? 4 : 2;
constexpr int64_t kTile = vec::kLanes;
#else
constexpr int64_t kXRows = 4;
constexpr int64_t kTile = 16;
#endif
// The thread_scratch slot of the low rows.
constexpr int kLowSlot = 7;
// Adapters are read once a step from DRAM (tens of MB, past the last-level cache) in short
// runs the hardware prefetcher barely ramps up on (a 16-output tile of B is 512 bytes, a row of
// A under 2 KiB), so the loads stalled on memory latency: about 3 GB/s against a 17 GB/s
// plain stream (bench/stream_read.sh). Phase 2 prefetches this far ahead of the tile it reads.
constexpr int64_t kAheadBytes = 2048;

// Prefetches bytes [from, from + count) of the weight at `base`, `size` bytes, that lie in it.
inline void prefetch_lines(const char* base, int64_t size, int64_t from, int64_t count) {
  for (int64_t b = from; b < std::min(from + count, size); b += 64)
    __builtin_prefetch(base + b, 0, 3);
}

// A segment's low rows are r floats padded with zeros to whole vectors.
inline int64_t padded(int64_t r) {
  return (r + kTile - 1) / kTile * kTile;
}

void check(int64_t n, std::span<const LoraSegment> segments) {
  const int64_t in = segments[0].a.cols;
  for (const LoraSegment& s : segments) {
    for (const WeightView* w : {&s.a, &s.b})
      if (!is_float_weight(w->dtype))
        raise(Err::DTypeUnsupported, "LoRA weight [" + std::to_string(w->rows) + ", " +
                                         std::to_string(w->cols) + "] has dtype " +
                                         std::string(dtype_name(w->dtype)) +
                                         "; the CPU backend multiplies F32, F16 or BF16 weights");
    if (s.a.cols != in || s.a.rows != s.b.cols || s.a.rows < 1)
      raise(Err::TensorShapeMismatch,
            "LoRA segment with A [" + std::to_string(s.a.rows) + ", " + std::to_string(s.a.cols) +
                "] and B [" + std::to_string(s.b.rows) + ", " + std::to_string(s.b.cols) +
                "] on an input of " + std::to_string(in) + " columns");
    for (int64_t i = 0; i < s.count; ++i)
      if (s.rows[i] < 0 || s.rows[i] >= n)
        raise(Err::TensorShapeMismatch, "LoRA segment row " + std::to_string(s.rows[i]) +
                                            " outside the step's " + std::to_string(n) + " rows");
  }
}

#if defined(QMPI_CPU_VEC)

// Elements [k, k + n) (n <= kTile) of a BF16, F16 or F32 row as float32, lanes past n zero.
template <DType T>
inline vec::F load_row(const void* row, int64_t k, int64_t n) {
  if constexpr (T == DType::F32) {
    const float* p = static_cast<const float*>(row) + k;
    return n == kTile ? vec::load(p) : vec::load_first(p, int(n));
  } else {
    alignas(64) uint16_t tail[kTile];
    const uint16_t* p = vec::whole_or_padded(static_cast<const uint16_t*>(row) + k, n, tail);
    return T == DType::BF16 ? vec::load_bf16(p) : vec::load_f16(p);
  }
}

// low[i * padded(r) + j] = scale * (x[rows[i]] . A[j]) for j in [j0, j0 + kARows) of the segment
// and all its rows. The kARows rows of A stay in L1/L2 while kXRows rows of x at a time stream past
// them; rows past the ends are computed on a clamped copy and not stored.
template <DType T>
void low_rows(const float* x, const LoraSegment& s, int64_t j0, float* low) {
  const int64_t in = s.a.cols, r = s.a.rows, esz = int64_t(dtype_size(T)), a_size = r * in * esz;
  const char* a_base = static_cast<const char*>(s.a.data);
  const char* a[kARows];
  for (int64_t u = 0; u < kARows; ++u) a[u] = a_base + std::min(j0 + u, r - 1) * in * esz;
  for (int64_t i0 = 0; i0 < s.count; i0 += kXRows) {
    const float* xr[kXRows];
    for (int64_t v = 0; v < kXRows; ++v) xr[v] = x + s.rows[std::min(i0 + v, s.count - 1)] * in;
    vec::F acc[kARows][kXRows];
    for (auto& row : acc)
      for (vec::F& c : row) c = vec::zero();
    for (int64_t k = 0; k < in; k += kTile) {
      const int64_t n = std::min(kTile, in - k);
      // The next block of kARows rows follows this one in A; the first pass over x fetches it
      // at the pace this block is read.
      if (i0 == 0)
        prefetch_lines(a_base, a_size, (j0 + kARows) * in * esz + kARows * k * esz,
                       kARows * kTile * esz);
      vec::F w[kARows];
      for (int64_t u = 0; u < kARows; ++u) w[u] = load_row<T>(a[u], k, n);
      for (int64_t v = 0; v < kXRows; ++v) {
        const vec::F xv = n == kTile ? vec::load(xr[v] + k) : vec::load_first(xr[v] + k, int(n));
        for (int64_t u = 0; u < kARows; ++u) acc[u][v] = vec::fma(w[u], xv, acc[u][v]);
      }
    }
    // Reduced with constant indices first: a loop bounded by count and r made the compiler
    // keep acc[][] on the stack too, sixteen stores in every step of the k loop above.
    float sums[kARows][kXRows];
    for (int64_t u = 0; u < kARows; ++u)
      for (int64_t v = 0; v < kXRows; ++v) sums[u][v] = vec::sum(acc[u][v]);
    for (int64_t v = 0; v < kXRows && i0 + v < s.count; ++v)
      for (int64_t u = 0; u < kARows && j0 + u < r; ++u)
        low[(i0 + v) * padded(r) + j0 + u] = s.scale * sums[u][v];
  }
}

// out[rows[i], o0 .. o0 + kTile) += low[i] . B[o]^T for every row of the segment. Each
// kTile x kTile block of B (kTile outputs, kTile of the r inputs) is widened and transposed in
// registers once (vec::transpose), then every row adds its broadcast low values times those
// vectors: no reduction across lanes. low rows are padded with zeros to whole blocks
// (padded(r)), as B's missing columns are.
template <DType T>
void add_tile(const LoraSegment& s, const float* low, int64_t o0) {
  const int64_t r = s.b.cols, rp = padded(r), esz = int64_t(dtype_size(T)), width = s.b.rows;
  const int64_t rows = std::min(kTile, width - o0);
  const auto* b = static_cast<const char*>(s.b.data);
  // The tiles of B follow each other in memory: fetch the one kAheadBytes on.
  prefetch_lines(b, width * r * esz, o0 * r * esz + kAheadBytes, kTile * r * esz);
  for (int64_t c = 0; c < r; c += kTile) {
    vec::F v[kTile];
    for (int64_t l = 0; l < kTile; ++l)
      v[l] =
          l < rows ? load_row<T>(b + (o0 + l) * r * esz, c, std::min(kTile, r - c)) : vec::zero();
    vec::transpose(v);
    for (int64_t i = 0; i < s.count; ++i) {
      const float* li = low + i * rp + c;
      vec::F acc = vec::zero();
      for (int j = 0; j < kTile; ++j) acc = vec::fma(vec::splat(li[j]), v[j], acc);
      float* o = s.out + s.rows[i] * width + o0;
      vec::store_first(o, int(rows), vec::add(vec::load_first(o, int(rows)), acc));
    }
  }
}

template <template <DType> class Op, class... Args>
void by_dtype(DType t, Args&&... args) {
  if (t == DType::BF16)
    Op<DType::BF16>::run(args...);
  else if (t == DType::F16)
    Op<DType::F16>::run(args...);
  else
    Op<DType::F32>::run(args...);
}
template <DType T>
struct LowRows {
  static void run(const float* x, const LoraSegment& s, int64_t j0, float* low) {
    low_rows<T>(x, s, j0, low);
  }
};
template <DType T>
struct AddTile {
  static void run(const LoraSegment& s, const float* low, int64_t o0) { add_tile<T>(s, low, o0); }
};

void low_block(const float* x, const LoraSegment& s, int64_t j0, float* low) {
  by_dtype<LowRows>(s.a.dtype, x, s, j0, low);
}
void add_block(const LoraSegment& s, const float* low, int64_t o0) {
  by_dtype<AddTile>(s.b.dtype, s, low, o0);
}

#else  // the portable path: the same two phases, one element at a time

void low_block(const float* x, const LoraSegment& s, int64_t j0, float* low) {
  const int64_t in = s.a.cols, r = s.a.rows;
  for (int64_t j = j0; j < std::min(j0 + kARows, r); ++j)
    for (int64_t i = 0; i < s.count; ++i) {
      const float* xr = x + s.rows[i] * in;
      float acc = 0.0f;
      for (int64_t k = 0; k < in; ++k) acc += xr[k] * load_as_f32(s.a.data, s.a.dtype, j * in + k);
      low[i * padded(r) + j] = s.scale * acc;
    }
}
void add_block(const LoraSegment& s, const float* low, int64_t o0) {
  const int64_t r = s.b.cols, width = s.b.rows;
  for (int64_t i = 0; i < s.count; ++i)
    for (int64_t o = o0; o < std::min(o0 + kTile, width); ++o) {
      float acc = 0.0f;
      for (int64_t j = 0; j < r; ++j)
        acc += low[i * padded(r) + j] * load_as_f32(s.b.data, s.b.dtype, o * r + j);
      s.out[s.rows[i] * width + o] += acc;
    }
}

#endif

}  // namespace

void lora_delta(const float* x, int64_t n, std::span<const LoraSegment> segments, int threads) {
  if (segments.empty()) return;
  check(n, segments);
  const int64_t in = segments[0].a.cols;
  // Phase 1's items are blocks of kARows rows of A, phase 2's tiles of kTile outputs, segment
  // after segment; each segment's low rows [count, padded(r)] follow the previous segment's,
  // zero where r ends.
  const size_t ns = segments.size();
  std::vector<int64_t> first_block(ns + 1, 0), first_tile(ns + 1, 0), low_at(ns + 1, 0);
  int64_t elements = 0;
  for (size_t s = 0; s < ns; ++s) {
    const int64_t r = segments[s].a.rows, width = segments[s].b.rows;
    first_block[s + 1] = first_block[s] + (r + kARows - 1) / kARows;
    first_tile[s + 1] = first_tile[s] + (width + kTile - 1) / kTile;
    low_at[s + 1] = low_at[s] + segments[s].count * padded(r);
    elements += r * (in + width);
  }
  float* low = thread_scratch<float, kLowSlot>(size_t(std::max<int64_t>(low_at.back(), 1)));
  std::fill(low, low + low_at.back(), 0.0f);
  const int nt = threads_for(threads, elements, kGrain);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), tn = omp_get_num_threads();
    const Range blocks = split_range(first_block.back(), 1, t, tn);
    for (int64_t item = blocks.begin, s = 0; item < blocks.end; ++item) {
      while (first_block[size_t(s) + 1] <= item) ++s;
      const LoraSegment& seg = segments[size_t(s)];
      low_block(x, seg, (item - first_block[size_t(s)]) * kARows, low + low_at[size_t(s)]);
    }
#pragma omp barrier
    // Any split of the tiles is safe: segments on one output hold different rows.
    const Range tiles = split_range(first_tile.back(), 1, t, tn);
    for (int64_t item = tiles.begin, s = 0; item < tiles.end; ++item) {
      while (first_tile[size_t(s) + 1] <= item) ++s;
      const LoraSegment& seg = segments[size_t(s)];
      add_block(seg, low + low_at[size_t(s)], (item - first_tile[size_t(s)]) * kTile);
    }
  }
}

}  // namespace qmpi::cpu
