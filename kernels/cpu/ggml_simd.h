// AVX-512 (and AVX2) decoders of every quantized GGUF weight type, for the kernels that decode
// weights inside their register tiles (matmul_ggml_gemv.cpp) or into a float panel
// (matmul_ggml_blocked.cpp). The 32-element types matter as much as the k-quants: llama-quantize
// stores a Q4_K/Q5_K/Q6_K matrix whose rows are not whole 256-blocks (qwen2.5-0.5b's 896-wide
// ones) as Q5_0/Q5_1/Q8_0. Each decoder hands its block to `use(c, w)` as 16-weight chunks:
// chunk c is elements [16 c, 16 c + 16) of the block, already scaled (and less the min), in
// float32. The bit layouts are ggml_dequant.cpp's; the arithmetic differs only in that the
// scale and min meet the quant in one fused multiply-add.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/ggml_types.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

#if (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)) || \
    (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#define QMPI_GGML_SIMD 1
#endif

namespace qmpi::cpu::ggml_simd {

#if defined(QMPI_GGML_SIMD)

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_f32(h);
}

inline __m128i low_nibbles(__m128i v) {
  return _mm_and_si128(v, _mm_set1_epi8(0x0f));
}
inline __m128i high_nibbles(__m128i v) {
  return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f));
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// A chunk of 16 float32 weights: one register.
using Chunk = __m512;
inline Chunk splat(float v) {
  return _mm512_set1_ps(v);
}
inline Chunk mul(Chunk a, Chunk b) {
  return _mm512_mul_ps(a, b);
}
inline Chunk fma(Chunk a, Chunk b, Chunk c) {
  return _mm512_fmadd_ps(a, b, c);
}
inline Chunk fms(Chunk a, Chunk b, Chunk c) {
  return _mm512_fmsub_ps(a, b, c);
}
inline Chunk add(Chunk a, Chunk b) {
  return _mm512_add_ps(a, b);
}
inline Chunk zero() {
  return _mm512_setzero_ps();
}
// a * x[0, 16) + acc
inline Chunk fma_x(Chunk a, const float* x, Chunk acc) {
  return _mm512_fmadd_ps(a, _mm512_loadu_ps(x), acc);
}
inline float sum(Chunk a) {
  return _mm512_reduce_add_ps(a);
}
inline void store(float* p, Chunk a) {
  _mm512_storeu_ps(p, a);
}
// 16 unsigned (signed) bytes as float32.
inline Chunk bytes_to_ps(__m128i v) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
}
inline Chunk signed_bytes_to_ps(__m128i v) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
}
// q + v in the bytes i whose bit i of `bits` is set; in the bytes where `bytes & bit` is nonzero.
inline __m128i add_where_bits(__m128i q, uint32_t bits, int8_t v) {
  return _mm_mask_add_epi8(q, __mmask16(bits), q, _mm_set1_epi8(v));
}
inline __m128i add_where_set(__m128i q, __m128i bytes, uint8_t bit, int8_t v) {
  return _mm_mask_add_epi8(q, _mm_test_epi8_mask(bytes, _mm_set1_epi8(char(bit))), q,
                           _mm_set1_epi8(v));
}
#else
// AVX2: a chunk is two registers of 8; byte masks come from compares instead of mask registers.
struct Chunk {
  __m256 lo, hi;
};
inline Chunk splat(float v) {
  return {_mm256_set1_ps(v), _mm256_set1_ps(v)};
}
inline Chunk mul(Chunk a, Chunk b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
inline Chunk fma(Chunk a, Chunk b, Chunk c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline Chunk fms(Chunk a, Chunk b, Chunk c) {
  return {_mm256_fmsub_ps(a.lo, b.lo, c.lo), _mm256_fmsub_ps(a.hi, b.hi, c.hi)};
}
inline Chunk add(Chunk a, Chunk b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
inline Chunk zero() {
  return {_mm256_setzero_ps(), _mm256_setzero_ps()};
}
inline Chunk fma_x(Chunk a, const float* x, Chunk acc) {
  return {_mm256_fmadd_ps(a.lo, _mm256_loadu_ps(x), acc.lo),
          _mm256_fmadd_ps(a.hi, _mm256_loadu_ps(x + 8), acc.hi)};
}
inline float sum(Chunk a) {
  return vec::sum(_mm256_add_ps(a.lo, a.hi));
}
inline void store(float* p, Chunk a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
inline Chunk bytes_to_ps(__m128i v) {
  return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)),
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)))};
}
inline Chunk signed_bytes_to_ps(__m128i v) {
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)),
          _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))};
}
inline __m128i add_where_bits(__m128i q, uint32_t bits, int8_t v) {
  // byte i of the low 8 (high 8) copies byte 0 (1) of bits; each then keeps its own bit.
  const __m128i spread =
      _mm_shuffle_epi8(_mm_cvtsi32_si128(int(bits & 0xffff)),
                       _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
  const __m128i bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(spread, bit), bit);
  return _mm_add_epi8(q, _mm_and_si128(set, _mm_set1_epi8(v)));
}
inline __m128i add_where_set(__m128i q, __m128i bytes, uint8_t bit, int8_t v) {
  const __m128i b = _mm_set1_epi8(char(bit));
  const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(bytes, b), b);
  return _mm_add_epi8(q, _mm_and_si128(set, _mm_set1_epi8(v)));
}
#endif

struct Q8_0 {
  static constexpr int kElems = 32, kBytes = 34;
  template <class Use>
  static void block(const uint8_t* b, Use&& use) {
    const Chunk d = splat(f16_at(b));
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * c));
      use(c, mul(signed_bytes_to_ps(q), d));
    }
  }
};

// (q - 8) d as q d - 8 d.
struct Q4_0 {
  static constexpr int kElems = 32, kBytes = 18;
  template <class Use>
  static void block(const uint8_t* b, Use&& use) {
    const float d = f16_at(b);
    const Chunk vd = splat(d), v8d = splat(8.0f * d);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    use(0, fms(bytes_to_ps(low_nibbles(q)), vd, v8d));
    use(1, fms(bytes_to_ps(high_nibbles(q)), vd, v8d));
  }
};

// Q4_1, Q5_0 and Q5_1 (Q4_0's nibbles; Q5's fifth bit of element i is bit i of qh): q d + m, or
// (q - 16) d as q d - 16 d.
template <bool kFive, bool kMin>
struct Q45_01 {
  static constexpr int kElems = 32, kBytes = 18 + (kFive ? 4 : 0) + (kMin ? 2 : 0);
  template <class Use>
  static void block(const uint8_t* b, Use&& use) {
    const float d = f16_at(b);
    const Chunk vd = splat(d);
    const Chunk vm = splat(kMin ? f16_at(b + 2) : -16.0f * d);
    const uint8_t* p = b + (kMin ? 4 : 2);
    uint32_t qh = 0;
    if constexpr (kFive) std::memcpy(&qh, p, 4);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + (kFive ? 4 : 0)));
    __m128i q[2] = {low_nibbles(raw), high_nibbles(raw)};
#pragma GCC unroll 2
    for (int c = 0; c < 2; ++c) {
      if constexpr (kFive) q[c] = add_where_bits(q[c], qh >> (16 * c), 16);
      use(c, fma(bytes_to_ps(q[c]), vd, vm));
    }
  }
};

// Q4_K and Q5_K: sub-blocks 2p and 2p + 1 are the low and high nibbles of qs[32 p, 32 p + 32),
// chunk c = 2 s + (l >= 16); Q5_K adds 16 where bit s of qh[l] is set.
template <bool kFive>
struct Q45_K {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144;
  template <class Use>
  static void block(const uint8_t* b, Use&& use) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t* qs = b + (kFive ? 48 : 16);
    __m128i qh[2];
    if constexpr (kFive)
      for (int hh = 0; hh < 2; ++hh)
        qh[hh] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 + 16 * hh));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, mn;
      k_quant_scale_min(b + 4, s, sc, mn);
      const Chunk ds = splat(d * float(sc)), ms = splat(dmin * float(mn));
#pragma GCC unroll 2
      for (int hh = 0; hh < 2; ++hh) {
        const __m128i raw =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 32 * (s / 2) + 16 * hh));
        __m128i q = s % 2 ? high_nibbles(raw) : low_nibbles(raw);
        if constexpr (kFive) q = add_where_set(q, qh[hh], uint8_t(1 << s), 16);
        use(2 * s + hh, fms(bytes_to_ps(q), ds, ms));
      }
    }
  }
};

// Q2_K and Q3_K: chunk c = 8 h + 2 j + hh holds elements 128 h + 32 j + 16 hh + [0, 16), bits
// 2j..2j+1 of qs[32 h + 16 hh ...] with one scale (and Q2_K's min) per chunk. Q2_K: d (sc & 15) q
// - dmin (sc >> 4); Q3_K adds 4 where bit 4 h + j of hmask[16 hh ...] is set: (q - 4) s.
template <bool kThree>
struct Q23_K {
  static constexpr int kElems = 256, kBytes = kThree ? 110 : 84;
  template <class Use>
  static void block(const uint8_t* b, Use&& use) {
    const uint8_t* qs = b + (kThree ? 32 : 16);
    const float d = f16_at(b + (kThree ? 108 : 80)), dmin = kThree ? 0.0f : f16_at(b + 82);
#pragma GCC unroll 2
    for (int hh = 0; hh < 2; ++hh) {
      const __m128i hmask = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * hh));
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m128i raw =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 32 * h + 16 * hh));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const int c = 8 * h + 2 * j + hh;
          __m128i q = _mm_and_si128(_mm_srli_epi16(raw, 2 * j), _mm_set1_epi8(3));
          Chunk s, m;
          if constexpr (kThree) {
            q = add_where_set(q, hmask, uint8_t(1 << (4 * h + j)), 4);
            const float sc = d * float(q3_k_scale(b + 96, c));
            s = splat(sc), m = splat(4.0f * sc);
          } else {
            const uint8_t sc = b[c];
            s = splat(d * float(sc & 15)), m = splat(dmin * float(sc >> 4));
          }
          use(c, fms(bytes_to_ps(q), s, m));
        }
      }
    }
  }
};

// Q6_K: chunk c = 8 h + 2 k + hh holds elements 128 h + 32 k + 16 hh + [0, 16): low nibbles from
// ql[64 h + 32 (k % 2) + 16 hh ...] (high half for k >= 2), top two bits at bits 2k of
// qh[32 h + 16 hh ...], one int8 scale; (q - 32) s as q s - 32 s.
struct Q6_K {
  static constexpr int kElems = 256, kBytes = 210;
  template <class Use>
  static void block(const uint8_t* b, Use&& use) {
    const float d = f16_at(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h)
#pragma GCC unroll 2
      for (int hh = 0; hh < 2; ++hh) {
        const __m128i qh =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 128 + 32 * h + 16 * hh));
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m128i ql = _mm_loadu_si128(
              reinterpret_cast<const __m128i*>(b + 64 * h + 32 * (k % 2) + 16 * hh));
          const __m128i lo = k < 2 ? low_nibbles(ql) : high_nibbles(ql);
          const __m128i hi =
              _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 2 * k), _mm_set1_epi8(3)), 4);
          const int c = 8 * h + 2 * k + hh;
          const float s = d * float(scales[c]);
          use(c, fms(bytes_to_ps(_mm_or_si128(lo, hi)), splat(s), splat(32.0f * s)));
        }
      }
  }
};

// f(D{}) for the decoder of `type`; false when the type has none (the plain path serves it).
template <class F>
bool with_decoder(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::Q8_0:
      f(Q8_0{});
      return true;
    case GgmlType::Q4_0:
      f(Q4_0{});
      return true;
    case GgmlType::Q4_1:
      f(Q45_01<false, true>{});
      return true;
    case GgmlType::Q5_0:
      f(Q45_01<true, false>{});
      return true;
    case GgmlType::Q5_1:
      f(Q45_01<true, true>{});
      return true;
    case GgmlType::Q2_K:
      f(Q23_K<false>{});
      return true;
    case GgmlType::Q3_K:
      f(Q23_K<true>{});
      return true;
    case GgmlType::Q4_K:
      f(Q45_K<false>{});
      return true;
    case GgmlType::Q5_K:
      f(Q45_K<true>{});
      return true;
    case GgmlType::Q6_K:
      f(Q6_K{});
      return true;
    default:
      return false;
  }
}

#endif

// Whether `type` has a decoder above in this build.
inline bool has_decoder(GgmlType type) {
#if defined(QMPI_GGML_SIMD)
  return with_decoder(type, [](auto) {});
#else
  return false;
#endif
}

}  // namespace qmpi::cpu::ggml_simd
