// The GGUF decode GEMV with int8 activations: what `--dtype auto` (MatmulOptions::
// bf16_activations) runs for Q8_0, Q4_0, Q5_0, Q4_K and Q6_K weights; `--dtype float32` keeps the
// exact float GEMV (matmul_ggml_gemv.cpp). llama.cpp computes these types the same way.
//
// Each row of x is quantized once per call, per 32-element block: step dx = max|x| / 127, q =
// round(x / dx) in [-127, 127]. VPDPBUSD (AVX512-VNNI; on AVX2 VPMADDUBSW and VPMADDWD) then
// multiplies 64 unsigned weight quants with 64 of these int8 activations into 16 exact int32 sums
// (8 lanes per block), and the block scales meet the sums in float32 once per block: about a
// third of the instructions of decoding every weight to float32 and multiplying it with a
// float32 activation.
//
// Numerics: a quantized activation is off by at most dx / 2, so an output differs from the
// exact product of the same weights by at most sum over blocks b of (max|x_b| / 254) *
// sum_{i in b} |w_i|, plus float32 rounding; MatmulGgmlInt8 asserts that bound against the
// float64 reference. Signed or offset quants become unsigned by adding the offset (Q6_K: 32,
// Q5_0: 16, Q4_0: 8, Q8_0: 128 on AVX-512; Q4_K's are unsigned already); the sum starts at
// -offset * sum(q of x), computed with the activations, so the result is exactly the signed sum.
// AVX2's Q8_0 multiplies |q| by x carrying q's sign instead: q + 128 would overflow its int16
// pairs.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/ggml_simd.h"
#include "kernels/cpu/matmul_ggml.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(QMPI_CPU_INT8_DOT)
namespace {

// Below this many weights per thread, extra threads cost more than they bring.
constexpr int64_t kGrain = 64 * 1024;
// Rows of x one pass over a weight row serves (the row stays in L1 for the next tile).
constexpr int kTokens = 4;
// Weight rows one call serves (rows_32).
constexpr int kRows = 2;
// How far ahead of the block being decoded the next weight bytes are asked into L2: the GEMV
// reads each weight once, so without it a core keeps too few misses in flight.
constexpr int64_t kAhead = 4096;

// The kernels are written once over these: Q64, 64 int8 quants (two 32-blocks); S16, 16 int32
// lanes of 4 quants each; F16 (ggml_simd::Chunk), 16 float32 lanes. AVX-512 keeps each in one
// register and multiplies with VPDPBUSD; AVX2 keeps two halves (one 32-block each) and multiplies
// with VPMADDUBSW (pairs of u8 x s8 products summed into int16, saturating) and VPMADDWD (the
// pairs summed into int32): exact while no pair exceeds 32767, which every offset below keeps
// (2 x 63 x 127 for Q6_K), and Q8_0 multiplies |q| by x with q's sign instead (2 x 128 x 127).
using F16 = ggml_simd::Chunk;
#if defined(__AVX512VNNI__)
using Q64 = __m512i;
using S16 = __m512i;
inline Q64 load_q(const void* p) {
  return _mm512_loadu_si512(p);
}
inline Q64 join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline Q64 bytes(int8_t v) {
  return _mm512_set1_epi8(v);
}
inline Q64 and_(Q64 a, Q64 b) {
  return _mm512_and_si512(a, b);
}
inline Q64 or_(Q64 a, Q64 b) {
  return _mm512_or_si512(a, b);
}
inline Q64 srli16(Q64 a, int n) {
  return _mm512_srli_epi16(a, unsigned(n));
}
inline Q64 slli16(Q64 a, int n) {
  return _mm512_slli_epi16(a, unsigned(n));
}
inline S16 load_s(const int32_t* p) {
  return _mm512_load_si512(p);
}
inline S16 zero_s() {
  return _mm512_setzero_si512();
}
// acc + per lane the sum of its 4 products u * s (u unsigned, s signed).
inline S16 dot(S16 acc, Q64 u, Q64 s) {
  return _mm512_dpbusd_epi32(acc, u, s);
}
inline F16 to_ps(S16 v) {
  return _mm512_cvtepi32_ps(v);
}
inline F16 load_ps(const float* p) {
  return _mm512_load_ps(p);
}
// 8 lanes of a, then 8 of b.
inline F16 halves(float a, float b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)),
                                             _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}
// Lanes 4 i .. 4 i + 3 of s[i], i < 4.
inline F16 quads(const float* s) {
  return _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                               _mm512_castps128_ps512(_mm_loadu_ps(s)));
}
// byte i of a 64-bit mask: v where bit i of `bits` is set, else 0.
inline Q64 where_bits(uint64_t bits, int8_t v) {
  return _mm512_maskz_mov_epi8(_cvtu64_mask64(bits), _mm512_set1_epi8(v));
}
// Signed quants times signed activations: q + 128 against x, the lane's start carrying
// -128 * sum(x quants).
constexpr int kSignedOffset = 128;
inline S16 dot_signed(S16 acc, Q64 q, Q64 x) {
  return dot(acc, _mm512_xor_si512(q, _mm512_set1_epi8(char(0x80))), x);
}
#else
struct Q64 {
  __m256i lo, hi;
};
struct S16 {
  __m256i lo, hi;
};
inline Q64 load_q(const void* p) {
  const auto* v = static_cast<const __m256i*>(p);
  return {_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1)};
}
inline Q64 join(__m256i lo, __m256i hi) {
  return {lo, hi};
}
inline Q64 bytes(int8_t v) {
  return {_mm256_set1_epi8(v), _mm256_set1_epi8(v)};
}
inline Q64 and_(Q64 a, Q64 b) {
  return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)};
}
inline Q64 or_(Q64 a, Q64 b) {
  return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)};
}
inline Q64 srli16(Q64 a, int n) {
  return {_mm256_srli_epi16(a.lo, n), _mm256_srli_epi16(a.hi, n)};
}
inline Q64 slli16(Q64 a, int n) {
  return {_mm256_slli_epi16(a.lo, n), _mm256_slli_epi16(a.hi, n)};
}
inline S16 load_s(const int32_t* p) {
  const auto* v = reinterpret_cast<const __m256i*>(p);
  return {_mm256_load_si256(v), _mm256_load_si256(v + 1)};
}
inline S16 zero_s() {
  return {_mm256_setzero_si256(), _mm256_setzero_si256()};
}
inline __m256i dot8(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
inline S16 dot(S16 acc, Q64 u, Q64 s) {
  return {dot8(acc.lo, u.lo, s.lo), dot8(acc.hi, u.hi, s.hi)};
}
inline F16 to_ps(S16 v) {
  return {_mm256_cvtepi32_ps(v.lo), _mm256_cvtepi32_ps(v.hi)};
}
inline F16 load_ps(const float* p) {
  return {_mm256_load_ps(p), _mm256_load_ps(p + 8)};
}
inline F16 halves(float a, float b) {
  return {_mm256_set1_ps(a), _mm256_set1_ps(b)};
}
inline F16 quads(const float* s) {
  return {_mm256_set_m128(_mm_set1_ps(s[1]), _mm_set1_ps(s[0])),
          _mm256_set_m128(_mm_set1_ps(s[3]), _mm_set1_ps(s[2]))};
}
inline __m256i where_bits32(uint32_t bits, int8_t v) {
  // byte i copies byte i / 8 of bits (VPSHUFB works within 16-byte halves, each holding all 4),
  // then keeps v where its own bit is set.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(v));
}
inline Q64 where_bits(uint64_t bits, int8_t v) {
  return {where_bits32(uint32_t(bits), v), where_bits32(uint32_t(bits >> 32), v)};
}
constexpr int kSignedOffset = 0;
inline S16 dot_signed(S16 acc, Q64 q, Q64 x) {
  return {dot8(acc.lo, _mm256_abs_epi8(q.lo), _mm256_sign_epi8(x.lo, q.lo)),
          dot8(acc.hi, _mm256_abs_epi8(q.hi), _mm256_sign_epi8(x.hi, q.hi))};
}
#endif

// 64 activations (two 32-blocks) as the kernels read them: int8 quants, each lane's block step,
// and each lane's starting sum -offset * (its 4 quants' sum).
struct alignas(64) XPair {
  int8_t q[64];
  float dx[16];
  int32_t start[16];
};

// x quantized for one weight type: pairs[row * pairs_per_row + p]; for Q4_K also, per 256-block
// of each row, the 8 sub-blocks' dx * sum(q), natural order (the mins' term).
struct QuantX {
  const XPair* pairs;
  int64_t pairs_per_row;
  const float* sums;
  int64_t sums_per_row;
};

// Q4_K's pair k of a 256-block holds sub-blocks (0, 2), (1, 3), (4, 6), (5, 7): the low and
// high nibbles of 64 quant bytes. Sub-block j therefore goes to slot j with bits 0 and 1 swapped.
inline int64_t k_quant_slot(int64_t block) {
  const int64_t j = block & 7;
  return (block & ~int64_t(7)) | ((j & 1) << 1) | ((j >> 1) & 1) | (j & 4);
}

// 32 activations as int8 quants round(x / dx) (dx = max|x| / 127, nearest even, as VCVTPS2DQ
// rounds), in order; returns dx.
inline float quantize_block(const float* x, int8_t* q) {
  vec::F v[32 / vec::kLanes];
  vec::F amax = vec::zero();
  for (int i = 0; i < 32 / vec::kLanes; ++i) {
    v[i] = vec::load(x + i * vec::kLanes);
    amax = vec::max(amax, vec::max(v[i], vec::sub(vec::zero(), v[i])));
  }
  const float top = vec::max_of(amax);
  const vec::F inv = vec::splat(top > 0.0f ? 127.0f / top : 0.0f);
#if defined(__AVX512F__)
  for (int i = 0; i < 2; ++i)
    _mm_store_si128(reinterpret_cast<__m128i*>(q + 16 * i),
                    _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], inv))));
#else
  __m256i n[4];
  for (int i = 0; i < 4; ++i) n[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
  // The packs interleave 4-quant groups of the 128-bit halves; the permute restores the order.
  const __m256i packed =
      _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
  _mm256_store_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#endif
  return top / 127.0f;
}

// One row of x (K a multiple of 64) into pairs; `sums` (Q4_K) gets dx * sum(q) per block.
void quantize_row(const float* x, int64_t K, int offset, bool k_quant, XPair* pairs, float* sums) {
  for (int64_t b = 0; b < K / 32; ++b) {
    const int64_t slot = k_quant ? k_quant_slot(b) : b;
    XPair& p = pairs[slot / 2];
    const int half = int(slot % 2);
    const float dx = quantize_block(x + 32 * b, p.q + 32 * half);
    const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.q + 32 * half));
    // Each int32 lane: the sum of its 4 quants.
    const __m256i four =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    _mm256_store_si256(reinterpret_cast<__m256i*>(p.start + 8 * half),
                       _mm256_mullo_epi32(four, _mm256_set1_epi32(-offset)));
    _mm256_store_ps(p.dx + 8 * half, _mm256_set1_ps(dx));
    if (sums) {
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), four);
      int32_t total = 0;
      for (int32_t l : lanes) total += l;
      sums[b] = dx * float(total);
    }
  }
}

QuantX quantize_x(const float* x, int64_t n, int64_t K, int offset, bool k_quant) {
  const int64_t pairs = K / 64, blocks = K / 32;
  XPair* xp = thread_scratch<XPair, 1>(size_t(n * pairs));
  float* sums = k_quant ? thread_scratch<float, 2>(size_t(n * blocks)) : nullptr;
  for (int64_t i = 0; i < n; ++i)
    quantize_row(x + i * K, K, offset, k_quant, xp + i * pairs, sums ? sums + i * blocks : nullptr);
  return {xp, pairs, sums, blocks};
}

// Two f16 block scales as 16 lanes: 8 of the first, then 8 of the second.
inline F16 pair_scales(const uint8_t* a, const uint8_t* b) {
  return halves(ggml_simd::f16_at(a), ggml_simd::f16_at(b));
}

// The 32-element types: two consecutive blocks as 64 quants (element order), their scales, and
// their products with 64 activation quants. kOffset is what makes the quants unsigned.
struct Q8_0 {
  static constexpr int kBytes = 34, kOffset = kSignedOffset;
  static void pair(const uint8_t* b, Q64& q, F16& s) {
    q = join(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)),
             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kBytes + 2)));
    s = pair_scales(b, b + kBytes);
  }
  static S16 times(S16 start, Q64 q, Q64 x) { return dot_signed(start, q, x); }
};

// Q4_0 and Q5_0: element i < 16 is the low nibble of qs[i], element i + 16 its high nibble; Q5_0
// adds 16 where bit i of qh is set.
template <bool kFive>
struct Q45_0 {
  static constexpr int kBytes = kFive ? 22 : 18, kOffset = kFive ? 16 : 8;
  // [a, a] shifted right by 0 and 4 and masked to nibbles: the block's 32 quants in order.
  static __m256i nibbles(const uint8_t* p) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_and_si256(
        _mm256_srlv_epi64(_mm256_set_m128i(a, a), _mm256_setr_epi64x(0, 0, 4, 4)),
        _mm256_set1_epi8(0x0f));
  }
  static void pair(const uint8_t* b, Q64& q, F16& s) {
    constexpr int qs = kFive ? 6 : 2;
    q = join(nibbles(b + qs), nibbles(b + kBytes + qs));
    if constexpr (kFive) {
      uint32_t ha, hc;
      std::memcpy(&ha, b + 2, 4);
      std::memcpy(&hc, b + kBytes + 2, 4);
      q = or_(q, where_bits(uint64_t(ha) | uint64_t(hc) << 32, 16));
    }
    s = pair_scales(b, b + kBytes);
  }
  static S16 times(S16 start, Q64 q, Q64 x) { return dot(start, q, x); }
};

// R weight rows (consecutive) times T rows of x. The rows share each pair of x's quants, and
// with R * T >= 2 every row has its own FMA chain; a lone row and token alternates two chains.
// Rows of 896 inputs are only 14 pairs: serving two at once halves the per-row work around them
// (the call, the horizontal sums) and the loads of x.
template <class D, int R, int T>
void rows_32(const GgmlWeightView& w, int64_t r0, const QuantX& qx, int64_t t0, const float* bias,
             float* out) {
  constexpr int C = R * T == 1 ? 2 : 1;
  const uint8_t* row = w.data + r0 * w.row_bytes;
  F16 acc[C][R][T];
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < R; ++i)
      for (int t = 0; t < T; ++t) acc[c][i][t] = ggml_simd::zero();
  const XPair* x0 = qx.pairs + t0 * qx.pairs_per_row;
  for (int64_t p = 0; p < qx.pairs_per_row; ++p) {
    Q64 q[R];
    F16 s[R];
    for (int i = 0; i < R; ++i) {
      const uint8_t* b = row + i * w.row_bytes + 2 * p * D::kBytes;
      __builtin_prefetch(b + kAhead, 0, 2);
      __builtin_prefetch(b + kAhead + 64, 0, 2);
      D::pair(b, q[i], s[i]);
    }
    for (int t = 0; t < T; ++t) {
      const XPair& xp = x0[t * qx.pairs_per_row + p];
      const S16 start = load_s(xp.start);
      const Q64 xq = load_q(xp.q);
      const F16 dx = load_ps(xp.dx);
      for (int i = 0; i < R; ++i) {
        F16& a = acc[p % C][i][t];
        a = ggml_simd::fma(to_ps(D::times(start, q[i], xq)), ggml_simd::mul(s[i], dx), a);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      F16 sum = acc[0][i][t];
      for (int c = 1; c < C; ++c) sum = ggml_simd::add(sum, acc[c][i][t]);
      out[(t0 + t) * w.rows + r0 + i] = ggml_simd::sum(sum) + (bias ? bias[r0 + i] : 0.0f);
    }
}

// Q4_K: d * sc_j * q - dmin * m_j per sub-block j of 32. The scales' 6-bit fields unpacked 4 at
// a time from 32-bit words of the 12 packed bytes (the layout of k_quant_scale_min).
inline void q4_k_scales(const uint8_t* s, uint64_t& sc, uint64_t& mn) {
  uint32_t u0, u1, u2;
  std::memcpy(&u0, s, 4);
  std::memcpy(&u1, s + 4, 4);
  std::memcpy(&u2, s + 8, 4);
  const uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
  sc = uint64_t(u0 & 0x3f3f3f3fu) | uint64_t(sc_hi) << 32;
  mn = uint64_t(u1 & 0x3f3f3f3fu) | uint64_t(mn_hi) << 32;
}

inline float sum8(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float total = 0.0f;
  for (float l : lanes) total += l;
  return total;
}

template <int T>
void row_q4_k(const GgmlWeightView& w, int64_t r, const QuantX& qx, int64_t t0, const float* bias,
              float* out) {
  constexpr int kBytes = 144;
  // Sub-blocks of pair k (the low 8 lanes, then the high 8).
  constexpr int kFirst[4] = {0, 1, 4, 5}, kSecond[4] = {2, 3, 6, 7};
  const uint8_t* row = w.data + r * w.row_bytes;
  F16 acc[2][T];
  __m256 mins[T];
  for (int t = 0; t < T; ++t) {
    acc[0][t] = acc[1][t] = ggml_simd::zero();
    mins[t] = _mm256_setzero_ps();
  }
  const XPair* x0 = qx.pairs + t0 * qx.pairs_per_row;
  const float* s0 = qx.sums + t0 * qx.sums_per_row;
  const Q64 nib = bytes(0x0f);
  for (int64_t g = 0; g < w.cols / 256; ++g) {
    const uint8_t* b = row + g * kBytes;
    __builtin_prefetch(b + kAhead, 0, 2);
    __builtin_prefetch(b + kAhead + 64, 0, 2);
    __builtin_prefetch(b + kAhead + 128, 0, 2);
    uint64_t sc, mn;
    q4_k_scales(b + 4, sc, mn);
    alignas(32) float scale[8];
    _mm256_store_ps(
        scale,
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(sc)))),
                      _mm256_set1_ps(ggml_simd::f16_at(b))));
    const __m256 mins_g =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(mn)))),
                      _mm256_set1_ps(ggml_simd::f16_at(b + 2)));
    const Q64 raw[2] = {load_q(b + 16), load_q(b + 80)};
    const Q64 q[4] = {and_(raw[0], nib), and_(srli16(raw[0], 4), nib), and_(raw[1], nib),
                      and_(srli16(raw[1], 4), nib)};
    F16 s[4];
    for (int k = 0; k < 4; ++k) s[k] = halves(scale[kFirst[k]], scale[kSecond[k]]);
    for (int t = 0; t < T; ++t) {
      const XPair* xp = x0 + t * qx.pairs_per_row + 4 * g;
      for (int k = 0; k < 4; ++k) {
        const S16 sum = dot(zero_s(), q[k], load_q(xp[k].q));
        acc[k & 1][t] =
            ggml_simd::fma(to_ps(sum), ggml_simd::mul(s[k], load_ps(xp[k].dx)), acc[k & 1][t]);
      }
      mins[t] = _mm256_fmadd_ps(mins_g, _mm256_loadu_ps(s0 + t * qx.sums_per_row + 8 * g), mins[t]);
    }
  }
  for (int t = 0; t < T; ++t)
    out[(t0 + t) * w.rows + r] = ggml_simd::sum(ggml_simd::add(acc[0][t], acc[1][t])) -
                                 sum8(mins[t]) + (bias ? bias[r] : 0.0f);
}

// Q6_K: d * sc_c * (q - 32) with one int8 scale per 16 elements. The 256 elements in natural
// order are 4 vectors of 64: vector 2h takes the low nibbles of ql[64 h, 64 h + 64) and bits 0-1
// (first 32) and 2-3 (next 32) of qh[32 h, 32 h + 32) as the top two bits; vector 2h + 1 the
// high nibbles and bits 4-5 and 6-7. Lane i of vector v (4 elements) has scale 4 v + i / 4.
template <int T>
void row_q6_k(const GgmlWeightView& w, int64_t r, const QuantX& qx, int64_t t0, const float* bias,
              float* out) {
  constexpr int kBytes = 210;
  const uint8_t* row = w.data + r * w.row_bytes;
  F16 acc[2][T];
  for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = ggml_simd::zero();
  const XPair* x0 = qx.pairs + t0 * qx.pairs_per_row;
  const Q64 nib = bytes(0x0f), two = bytes(3);
  for (int64_t g = 0; g < w.cols / 256; ++g) {
    const uint8_t* b = row + g * kBytes;
    __builtin_prefetch(b + kAhead, 0, 2);
    __builtin_prefetch(b + kAhead + 64, 0, 2);
    __builtin_prefetch(b + kAhead + 128, 0, 2);
    __builtin_prefetch(b + kAhead + 192, 0, 2);
    alignas(32) float scale[16];
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m256 d = _mm256_set1_ps(ggml_simd::f16_at(b + 208));
    _mm256_store_ps(scale, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)), d));
    _mm256_store_ps(
        scale + 8,
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))), d));
    Q64 q[4];
    for (int h = 0; h < 2; ++h) {
      const Q64 ql = load_q(b + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
      const Q64 top_lo = join(qh, _mm256_srli_epi16(qh, 2));
      const Q64 top_hi = join(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));
      q[2 * h] = or_(and_(ql, nib), slli16(and_(top_lo, two), 4));
      q[2 * h + 1] = or_(and_(srli16(ql, 4), nib), slli16(and_(top_hi, two), 4));
    }
    F16 s[4];
    for (int v = 0; v < 4; ++v) s[v] = quads(scale + 4 * v);
    for (int t = 0; t < T; ++t) {
      const XPair* xp = x0 + t * qx.pairs_per_row + 4 * g;
      for (int v = 0; v < 4; ++v) {
        const S16 sum = dot(load_s(xp[v].start), q[v], load_q(xp[v].q));
        acc[v & 1][t] =
            ggml_simd::fma(to_ps(sum), ggml_simd::mul(s[v], load_ps(xp[v].dx)), acc[v & 1][t]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    out[(t0 + t) * w.rows + r] =
        ggml_simd::sum(ggml_simd::add(acc[0][t], acc[1][t])) + (bias ? bias[r] : 0.0f);
}

using RowFn = void (*)(const GgmlWeightView&, int64_t, const QuantX&, int64_t, const float*,
                       float*);
// kRows x kTokens kernels: [weight rows - 1][rows of x - 1].
using RowFns = RowFn[kRows][kTokens];

template <class D>
struct Rows32 {
  template <int R, int T>
  static void run(const GgmlWeightView& w, int64_t r, const QuantX& qx, int64_t t0,
                  const float* bias, float* out) {
    rows_32<D, R, T>(w, r, qx, t0, bias, out);
  }
  static constexpr RowFns kFns = {{run<1, 1>, run<1, 2>, run<1, 3>, run<1, 4>},
                                  {run<2, 1>, run<2, 2>, run<2, 3>, run<2, 4>}};
};

// The k-quant kernels take one weight row at a time: their rows are whole 256-element blocks,
// long enough that the per-row work is small beside them.
template <template <int> class Row>
struct RowsK {
  template <int R, int T>
  static void run(const GgmlWeightView& w, int64_t r, const QuantX& qx, int64_t t0,
                  const float* bias, float* out) {
    for (int i = 0; i < R; ++i) Row<T>::run(w, r + i, qx, t0, bias, out);
  }
  static constexpr RowFns kFns = {{run<1, 1>, run<1, 2>, run<1, 3>, run<1, 4>},
                                  {run<2, 1>, run<2, 2>, run<2, 3>, run<2, 4>}};
};
template <int T>
struct RowQ6K {
  static void run(const GgmlWeightView& w, int64_t r, const QuantX& qx, int64_t t0,
                  const float* bias, float* out) {
    row_q6_k<T>(w, r, qx, t0, bias, out);
  }
};
template <int T>
struct RowQ4K {
  static void run(const GgmlWeightView& w, int64_t r, const QuantX& qx, int64_t t0,
                  const float* bias, float* out) {
    row_q4_k<T>(w, r, qx, t0, bias, out);
  }
};

void gemv(const GgmlWeightView& w, int64_t n, const QuantX& qx, const RowFns& fns,
          const float* bias, float* out, int threads) {
  const int nt = threads_for(threads, w.rows * w.cols, kGrain);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t g = 0; g < (w.rows + kRows - 1) / kRows; ++g) {
    const int64_t r = g * kRows, nr = std::min<int64_t>(kRows, w.rows - r);
    for (int64_t t0 = 0; t0 < n; t0 += kTokens)
      fns[nr - 1][std::min<int64_t>(kTokens, n - t0) - 1](w, r, qx, t0, bias, out);
  }
}

}  // namespace

bool ggml_int8_supported(const GgmlWeightView& w) {
  switch (w.type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
      return w.cols % 64 == 0;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return w.cols % 256 == 0;
    default:
      return false;
  }
}

bool matmul_ggml_gemv_int8(const float* x, int64_t n, const GgmlWeightView& w,
                           const WeightView* bias, float* out, const MatmulOptions& opt) {
  if (!ggml_int8_supported(w)) return false;
  const AlignedArray<float> b = widen(bias);
  const auto run = [&](int offset, bool k_quant, const RowFns& fns) {
    const QuantX qx = quantize_x(x, n, w.cols, offset, k_quant);
    gemv(w, n, qx, fns, b.get(), out, opt.threads);
  };
  switch (w.type) {
    case GgmlType::Q8_0:
      run(Q8_0::kOffset, false, Rows32<Q8_0>::kFns);
      break;
    case GgmlType::Q4_0:
      run(Q45_0<false>::kOffset, false, Rows32<Q45_0<false>>::kFns);
      break;
    case GgmlType::Q5_0:
      run(Q45_0<true>::kOffset, false, Rows32<Q45_0<true>>::kFns);
      break;
    case GgmlType::Q6_K:
      run(32, false, RowsK<RowQ6K>::kFns);
      break;
    default:
      run(0, true, RowsK<RowQ4K>::kFns);
      break;
  }
  return true;
}

#else

bool ggml_int8_supported(const GgmlWeightView&) {
  return false;
}

bool matmul_ggml_gemv_int8(const float*, int64_t, const GgmlWeightView&, const WeightView*, float*,
                           const MatmulOptions&) {
  return false;
}

#endif

}  // namespace qmpi::cpu
