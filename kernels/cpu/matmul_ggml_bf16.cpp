// The GGUF prefill with bf16 activations (`--dtype auto`): the bf16 GEMM's tiles
// (matmul_blocked.cpp) on rows decoded to their integer quants (Q8_0's q, Q4_0's q - 8, Q5_0's
// q - 16: at most 8 significant bits, exact in bf16), each 32-element block's partial sums
// multiplied by its f16 scale as they are added up (scaled_rows.h). The only rounding beyond
// float32 sums is x's to bf16, as for bf16, FP8 and int4 weights. The float panel GEMM
// (matmul_ggml_blocked.cpp) multiplied float32 panels at about 0.84x llama.cpp's prefill of the
// same Q4_0 file. Types with a min (Q4_1, Q5_1, the k-quants but Q6_K) and Q6_K's 16-element
// scales keep the float panels.
#include <cstring>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dot_products.h"
#include "kernels/cpu/matmul_ggml.h"
#include "kernels/cpu/scaled_rows.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

#if defined(__AVX512BF16__)
namespace {

constexpr int64_t kBlock = 32;

// The bf16 bits of i - bias for i in [0, 32), looked up by VPERMW.
__m512i biased_table(int bias) {
  alignas(64) uint16_t v[32];
  for (int i = 0; i < 32; ++i) v[i] = f32_to_bf16(float(i - bias));
  return _mm512_load_si512(v);
}

// A block's 32 quants in element order as bytes: Q4_0's byte i holds element i in its low nibble
// and i + 16 in its high one; Q5_0 adds bit i of its 32-bit qh as element i's fifth bit.
inline __m256i q4_codes(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
}

struct GgmlRows final : ScaledRows {
  const GgmlWeightView& w;
  const __m512i q4_table = biased_table(8), q5_table = biased_table(16);
  explicit GgmlRows(const GgmlWeightView& v) : w(v) {
    rows = w.rows, cols = w.cols, blocks = w.cols / kBlock;
    bytes = reinterpret_cast<const char*>(w.data), row_bytes = w.row_bytes;
  }
  int64_t block_start(int64_t b) const override { return b * kBlock; }
  void decode(int64_t r0, int mr, int64_t ld, uint16_t* dst, float* scales,
              int64_t stride) const override {
    for (int i = 0; i < mr; ++i) {
      const uint8_t* src = w.data + (r0 + i) * w.row_bytes;
      uint16_t* out = dst + i * ld;
      for (int64_t b = 0; b < blocks; ++b, out += kBlock) {
        uint16_t d;
        std::memcpy(&d, src, 2);
        scales[b * stride + i] = half_to_f32(d);
        __m512i words;
        switch (w.type) {
          case GgmlType::Q4_0:
            words = _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(q4_codes(src + 2)), q4_table);
            src += 18;
            break;
          case GgmlType::Q5_0: {
            uint32_t qh;
            std::memcpy(&qh, src + 2, 4);
            const __m256i codes = _mm256_or_si256(
                q4_codes(src + 6), _mm256_maskz_mov_epi8(__mmask32(qh), _mm256_set1_epi8(16)));
            words = _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(codes), q5_table);
            src += 22;
            break;
          }
          default: {  // Q8_0: the int8 quants widened to float32 and narrowed, exactly
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2));
            const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
            const __m512 hi =
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
            words = __m512i(_mm512_cvtne2ps_pbh(hi, lo));
            src += 34;
          }
        }
        _mm512_storeu_si512(out, words);
      }
    }
  }
};

}  // namespace
#endif

bool matmul_ggml_blocked_bf16(const float* x, int64_t n, const GgmlWeightView& w,
                              const WeightView* bias, float* out, const MatmulOptions& opt) {
#if defined(__AVX512BF16__)
  if (w.type != GgmlType::Q4_0 && w.type != GgmlType::Q5_0 && w.type != GgmlType::Q8_0)
    return false;
  const GgmlRows rows(w);
  const ScaledTarget t{&rows, bias, out};
  matmul_blocked_scaled(x, n, {&t, 1}, opt);
  return true;
#else
  (void)x, (void)n, (void)w, (void)bias, (void)out, (void)opt;
  return false;
#endif
}

}  // namespace qmpi::cpu
