// The GGUF prefill with bf16 activations (`--dtype auto`): the bf16 GEMM's tiles
// (matmul_blocked.cpp) on rows decoded to their integer quants (Q8_0's q, Q4_0's q - 8, Q5_0's
// q - 16, Q6_K's q - 32, the unsigned quants of Q4_1, Q5_1, Q4_K and Q5_K: at most 8 significant
// bits, exact in bf16), each block's partial sums (16 weights for Q6_K, else 32) multiplied by its
// scale as they are added up (scaled_rows.h; a k-quant's scale is d times its 6- or 8-bit
// sub-block scale, exact in float32). The types with a min (w = scale q - min) then subtract, for
// each output, the min times the block's sum of x, as llama.cpp does with its block sums: a product
// with K/32 terms per output. The only rounding beyond float32 sums is x's to bf16, as for bf16,
// FP8 and int4 weights. The float panel GEMM (matmul_ggml_blocked.cpp) multiplied float32 panels at
// about 0.84x llama.cpp's prefill of the same Q4_0 file; Q2_K and Q3_K keep it.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ggml_dequant.h"
#include "kernels/cpu/ggml_simd.h"
#include "kernels/cpu/matmul_ggml.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scaled_rows.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(__AVX512BF16__) && defined(QMPI_GGML_SIMD)
namespace {

constexpr int64_t kBlock = 32;

bool has_min(GgmlType t) {
  return t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K;
}

using ggml_simd::f16_at;

// A block's 32 quants in element order as bytes: byte i of Q4_0/Q4_1 holds element i in its low
// nibble and i + 16 in its high one; Q5_0/Q5_1 add bit i of their 32-bit qh as element i's
// fifth bit.
inline __m256i q4_codes(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
}
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return _mm256_maskz_mov_epi8(__mmask32(bits), _mm256_set1_epi8(16));
}

struct GgmlRows final : ScaledRows {
  const GgmlWeightView& w;
  const GgmlTypeInfo& info;
  const int64_t scales_per_chunk;  // Q6_K scales 16 weights, the others 32
  // Look-up tables of quant -> bf16 of the weight's integer: q, q - 8, q - 16, and Q6_K's 64
  // entries of q - 32 (VPERMT2W over two).
  const __m512i plain = bf16_int_words(0), q4_0 = bf16_int_words(-8), q5_0 = bf16_int_words(-16);
  const __m512i q6_lo = bf16_int_words(-32), q6_hi = bf16_int_words(0);
  explicit GgmlRows(const GgmlWeightView& v)
      : w(v),
        info(*ggml_type_info(uint32_t(v.type))),
        scales_per_chunk(v.type == GgmlType::Q6_K ? 2 : 1) {
    rows = w.rows, cols = w.cols, blocks = w.cols / kBlock * scales_per_chunk;
    bytes = reinterpret_cast<const char*>(w.data), row_bytes = w.row_bytes;
  }
  int64_t block_start(int64_t b) const override { return b * kBlock / scales_per_chunk; }

  // Weights [32 c, 32 c + 32) of row r: their quants as bf16 words at out, and their scales
  // (scales_per_chunk of them).
  void chunk(int64_t r, int64_t c, uint16_t* out, float* scale) const {
    const int64_t per = info.block_elems / kBlock;  // chunks per stored block
    const uint8_t* p = w.data + r * w.row_bytes + (c / per) * int64_t(info.block_bytes);
    const int s = int(c % per);  // a k-quant's 32-element sub-block
    __m256i codes;
    __m512i table = plain;
    switch (w.type) {
      case GgmlType::Q8_0: {  // the int8 quants widened to float32 and narrowed, exactly
        scale[0] = f16_at(p);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
        const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
        _mm512_storeu_si512(out, __m512i(_mm512_cvtne2ps_pbh(hi, lo)));
        return;
      }
      case GgmlType::Q6_K: {  // element 128 h + 32 k + l: ql[64 h + 32 (k % 2) + l]'s nibble
        const int h = s / 4, k = s % 4;  // k / 2, bits 2k of qh[32 h + l] above it; +32
        const float d = f16_at(p + 208);
        const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
        scale[0] = d * float(sc[2 * s]), scale[1] = d * float(sc[2 * s + 1]);
        const __m256i ql =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32 * (k % 2)));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
        const __m256i lo =
            _mm256_and_si256(k / 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0f));
        const __m256i hi =
            _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
        const __m512i idx = _mm512_cvtepu8_epi16(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
        _mm512_storeu_si512(out, _mm512_permutex2var_epi16(q6_lo, idx, q6_hi));
        return;
      }
      case GgmlType::Q4_0:
        scale[0] = f16_at(p), codes = q4_codes(p + 2), table = q4_0;
        break;
      case GgmlType::Q5_0:
        scale[0] = f16_at(p), codes = _mm256_or_si256(q4_codes(p + 6), fifth_bits(p + 2));
        table = q5_0;
        break;
      case GgmlType::Q4_1:  // w = d q + m
        scale[0] = f16_at(p), codes = q4_codes(p + 4);
        break;
      case GgmlType::Q5_1:
        scale[0] = f16_at(p), codes = _mm256_or_si256(q4_codes(p + 8), fifth_bits(p + 4));
        break;
      default: {  // Q4_K, Q5_K: sub-blocks 2j and 2j + 1 are the nibbles of qs[32 j, 32 j + 32)
        const bool five = w.type == GgmlType::Q5_K;
        uint8_t sc, mn;
        k_quant_scale_min(p + 4, s, sc, mn);
        scale[0] = f16_at(p) * float(sc);
        const __m256i q = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(p + (five ? 48 : 16) + 32 * (s / 2)));
        codes = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0x0f));
        if (five) {  // bit s of qh[l] is element l's fifth
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
          codes = _mm256_or_si256(
              codes,
              _mm256_maskz_mov_epi8(_mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << s))),
                                    _mm256_set1_epi8(16)));
        }
      }
    }
    _mm512_storeu_si512(out, _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(codes), table));
  }

  // What block b of row r's weights are less (types with a min: a block is a chunk).
  float min_of(int64_t r, int64_t b) const {
    const int64_t per = info.block_elems / kBlock;
    const uint8_t* p = w.data + r * w.row_bytes + (b / per) * int64_t(info.block_bytes);
    if (per == 1) return -f16_at(p + 2);  // Q4_1, Q5_1: w = d q + m
    uint8_t sc, mn;
    k_quant_scale_min(p + 4, int(b % per), sc, mn);
    return f16_at(p + 2) * float(mn);
  }

  void decode(int64_t r0, int mr, int64_t ld, uint16_t* dst, float* scales,
              int64_t stride) const override {
    for (int i = 0; i < mr; ++i)
      for (int64_t c = 0; c < cols / kBlock; ++c) {
        float sc[2];
        chunk(r0 + i, c, dst + i * ld + c * kBlock, sc);
        for (int64_t j = 0; j < scales_per_chunk; ++j)
          scales[(c * scales_per_chunk + j) * stride + i] = sc[j];
      }
  }
};

// out[t, r] -= sum over blocks b of min(r, b) times the sum of block b of x rounded to bf16. The
// sums are held block-major so that a row's correction runs over the tokens in vector lanes (a
// dot product over the blocks per output made a Q4_K prefill slower than the float panels).
void subtract_mins(const GgmlRows& rows, const float* x, int64_t n, float* out,
                   const MatmulOptions& opt) {
  const int64_t K = rows.cols, B = rows.blocks;
  AlignedArray<float> sums = make_aligned<float>(size_t(n * B));  // [b * n + t]
  std::vector<float> xr(static_cast<size_t>(K));
  for (int64_t t = 0; t < n; ++t) {
    round_to_bf16(x + t * K, K, xr.data());
    for (int64_t b = 0; b < B; ++b) {
      float s = 0.0f;
      for (int64_t k = 0; k < kBlock; ++k) s += xr[size_t(b * kBlock + k)];
      sums[size_t(b * n + t)] = s;
    }
  }
  // A run of 16 rows and 64 tokens at a time: 4 rows x 4 vectors of tokens in registers, each
  // block's sums loaded once for 4 rows (a row at a time, loading and storing its sums per
  // block, was load- and store-bound: 11% of a Q4_K prefill), and each token's outputs of the
  // run written as one run of 16.
  constexpr int64_t kRows = 16, kTokens = 64;
  const int nt = threads_for(opt.threads, n * rows.rows * B, int64_t(1) << 16);
#pragma omp parallel num_threads(nt)
  {
    std::vector<float> mins(static_cast<size_t>(kRows * B));  // [row in run * B + b]
    alignas(64) float c[kRows][kTokens];
    const Range rr = split_range(rows.rows, kRows, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r0 = rr.begin; r0 < rr.end; r0 += kRows) {
      const int64_t m = std::min(kRows, rr.end - r0);
      for (int64_t j = 0; j < kRows; ++j)
        for (int64_t b = 0; b < B; ++b)
          mins[size_t(j * B + b)] = j < m ? rows.min_of(r0 + j, b) : 0;
      for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
        const int64_t tn = std::min(kTokens, n - t0);
        __mmask16 lanes[4];
        for (int v = 0; v < 4; ++v) {
          const int64_t left = std::clamp<int64_t>(tn - 16 * v, 0, 16);
          lanes[v] = __mmask16((1u << left) - 1);
        }
        for (int64_t j0 = 0; j0 < m; j0 += 4) {
          __m512 acc[4][4];
          for (auto& row : acc)
            for (__m512& a : row) a = _mm512_setzero_ps();
          for (int64_t b = 0; b < B; ++b) {
            const float* sb = sums.get() + b * n + t0;
            __m512 sv[4];
            for (int v = 0; v < 4; ++v) sv[v] = _mm512_maskz_loadu_ps(lanes[v], sb + 16 * v);
            for (int j = 0; j < 4; ++j) {
              const __m512 mv = _mm512_set1_ps(mins[size_t((j0 + j) * B + b)]);
              for (int v = 0; v < 4; ++v) acc[j][v] = _mm512_fmadd_ps(mv, sv[v], acc[j][v]);
            }
          }
          for (int j = 0; j < 4; ++j)
            for (int v = 0; v < 4; ++v) _mm512_store_ps(&c[j0 + j][16 * v], acc[j][v]);
        }
        for (int64_t t = 0; t < tn; ++t)
          for (int64_t j = 0; j < m; ++j) out[(t0 + t) * rows.rows + r0 + j] -= c[j][t];
      }
    }
  }
}

}  // namespace
#endif

bool matmul_ggml_blocked_bf16(const float* x, int64_t n, const GgmlWeightView& w,
                              const WeightView* bias, float* out, const MatmulOptions& opt) {
#if defined(__AVX512BF16__) && defined(QMPI_GGML_SIMD)
  switch (w.type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      break;
    default:
      return false;
  }
  const GgmlRows rows(w);
  const ScaledTarget t{&rows, bias, out};
  matmul_blocked_scaled(x, n, {&t, 1}, opt);
  if (has_min(w.type)) subtract_mins(rows, x, n, out, opt);
  return true;
#else
  (void)x, (void)n, (void)w, (void)bias, (void)out, (void)opt;
  return false;
#endif
}

}  // namespace qmpi::cpu
