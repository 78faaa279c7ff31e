#include "kernels/cpu/lora_delta.h"

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {
namespace {

// Below this many adapter elements per thread, a second thread costs more than it brings (as
// the GEMV's grain).
constexpr int64_t kGrain = 32 * 1024;
// Phase 1 computes kARows rows of A against kXRows rows of x at a time (16 accumulators).
constexpr int64_t kARows = 4;
constexpr int64_t kXRows = 4;
// Phase 2 adds kTile output columns of a row at a time: one vector of float32.
constexpr int64_t kTile = 16;
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
  return (r + 15) / 16 * 16;
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

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

// Elements [k, k + 16) of a BF16, F16 or F32 row as float32, lanes outside `m` zero.
template <DType T>
inline __m512 load16(const void* row, int64_t k, __mmask16 m) {
  if constexpr (T == DType::BF16) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + k);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (T == DType::F16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(row) + k));
  } else {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(row) + k);
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
    __m512 acc[kARows][kXRows];
    for (auto& row : acc)
      for (__m512& c : row) c = _mm512_setzero_ps();
    for (int64_t k = 0; k < in; k += 16) {
      const __mmask16 m = tail_mask(in - k);
      // The next block of kARows rows follows this one in A; the first pass over x fetches it
      // at the pace this block is read.
      if (i0 == 0)
        prefetch_lines(a_base, a_size, (j0 + kARows) * in * esz + kARows * k * esz,
                       kARows * 16 * esz);
      __m512 w[kARows];
      for (int64_t u = 0; u < kARows; ++u) w[u] = load16<T>(a[u], k, m);
      for (int64_t v = 0; v < kXRows; ++v) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, xr[v] + k);
        for (int64_t u = 0; u < kARows; ++u) acc[u][v] = _mm512_fmadd_ps(w[u], xv, acc[u][v]);
      }
    }
    // Reduced with constant indices first: a loop bounded by count and r made the compiler
    // keep acc[][] on the stack too, sixteen stores in every step of the k loop above.
    float sums[kARows][kXRows];
    for (int64_t u = 0; u < kARows; ++u)
      for (int64_t v = 0; v < kXRows; ++v) sums[u][v] = _mm512_reduce_add_ps(acc[u][v]);
    for (int64_t v = 0; v < kXRows && i0 + v < s.count; ++v)
      for (int64_t u = 0; u < kARows && j0 + u < r; ++u)
        low[(i0 + v) * padded(r) + j0 + u] = s.scale * sums[u][v];
  }
}

// The lane indices of one transpose round: row p (p & H == 0) keeps its left H-lane blocks and
// takes row p + H's left ones (`upper`); row p + H takes row p's right blocks (`lower`). Index
// 16 + i is lane i of the second operand (row p + H).
template <int H>
struct RoundIndex {
  alignas(64) int32_t upper[16], lower[16];
  constexpr RoundIndex() : upper(), lower() {
    for (int lane = 0; lane < 16; ++lane) {
      upper[lane] = (lane & H) ? 16 + lane - H : lane;
      lower[lane] = (lane & H) ? 16 + lane : lane + H;
    }
  }
};

// Each round's H is a constant, so the rows stay in registers: with H a loop variable the
// compiler kept v[] on the stack and the transpose cost more than the FMAs it feeds.
template <int H>
inline void transpose_round(__m512* v) {
  static constexpr RoundIndex<H> idx;
  const __m512i upper = _mm512_load_si512(idx.upper), lower = _mm512_load_si512(idx.lower);
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) {
    if (p & H) continue;
    const __m512 a = v[p], b = v[p + H];
    v[p] = _mm512_permutex2var_ps(a, upper, b);
    v[p + H] = _mm512_permutex2var_ps(a, lower, b);
  }
}

// v[j] lane l = the old v[l] lane j: a 16 x 16 transpose in registers, as four rounds that
// swap the off-diagonal H x H blocks of every 2H x 2H block.
inline void transpose16(__m512* v) {
  transpose_round<8>(v);
  transpose_round<4>(v);
  transpose_round<2>(v);
  transpose_round<1>(v);
}

// out[rows[i], o0 .. o0 + 16) += low[i] . B[o]^T for every row of the segment. Each 16 x 16
// block of B (16 outputs, 16 of the r inputs) is widened and transposed in registers once, then
// every row adds its 16 broadcast low values times those vectors: no reduction across lanes.
// low rows are padded with zeros to whole blocks (padded(r)), as B's missing columns are.
template <DType T>
void add_tile(const LoraSegment& s, const float* low, int64_t o0) {
  const int64_t r = s.b.cols, rp = padded(r), esz = int64_t(dtype_size(T)), width = s.b.rows;
  const int64_t rows = std::min(kTile, width - o0);
  const auto* b = static_cast<const char*>(s.b.data);
  const __mmask16 om = tail_mask(rows);
  // The tiles of B follow each other in memory: fetch the one kAheadBytes on.
  prefetch_lines(b, width * r * esz, o0 * r * esz + kAheadBytes, kTile * r * esz);
  for (int64_t c = 0; c < r; c += 16) {
    __m512 v[16];
    for (int64_t l = 0; l < 16; ++l)
      v[l] =
          l < rows ? load16<T>(b + (o0 + l) * r * esz, c, tail_mask(r - c)) : _mm512_setzero_ps();
    transpose16(v);
    for (int64_t i = 0; i < s.count; ++i) {
      const float* li = low + i * rp + c;
      __m512 acc = _mm512_setzero_ps();
      for (int j = 0; j < 16; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(li[j]), v[j], acc);
      float* o = s.out + s.rows[i] * width + o0;
      _mm512_mask_storeu_ps(o, om, _mm512_add_ps(_mm512_maskz_loadu_ps(om, o), acc));
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
