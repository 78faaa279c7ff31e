// The int4 prefill with bf16 activations: the bf16 GEMM's tiles (matmul_blocked.cpp) on rows
// decoded to bf16 q - z, an integer in [-16, 15] and so exact in bf16, with each group's partial
// sums multiplied by the row's scale for that group as they are added up (scaled_rows.h). The
// only rounding beyond float32 sums is x's to bf16, as for bf16 weights. On AVX2 the same rows
// take the float32 tiles, widened (matmul_blocked_scaled).
#include <algorithm>

#include "kernels/cpu/aligned.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/scaled_rows.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"
#include "kernels/int4_layout.h"

namespace qmpi::cpu {

#if defined(__AVX512BF16__) || (defined(QMPI_CPU_VEC) && !defined(__AVX512F__))
#if defined(__AVX512BF16__)

namespace {

// The bf16 bits of i - 16 for i in [0, 32): looked up by nibble + 16 - z (zeros lie in [0, 16],
// model/int4_loader.cpp).
const __m512i& biased_values() {
  static const __m512i t = [] {
    alignas(64) uint16_t v[32];
    for (int i = 0; i < 32; ++i) v[i] = f32_to_bf16(float(i - 16));
    return _mm512_load_si512(v);
  }();
  return t;
}

// The words q[0], q[stride], ..., count of them, as the bf16 bits of their nibbles minus z, in
// input order, 16 words at a time: the nibbles split into low and high bytes, each plus 16 - z,
// interleaved by VPUNPCKL/HBW, widened to 16 bits and looked up in biased_values() by VPERMW.
// The unpacking works within 16-byte lanes, so the gather puts word order[p] in lane p: the
// lanes' low halves then interleave to words 0-3 and 8-11, their high halves to 4-7 and 12-15.
void words_to_bf16(const uint32_t* q, int64_t stride, int64_t count, int z, uint16_t* dst) {
  const __m512i order = _mm512_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  const __m512i index = _mm512_mullo_epi32(order, _mm512_set1_epi32(int32_t(stride)));
  const __m512i low4 = _mm512_set1_epi8(15), bias = _mm512_set1_epi8(int8_t(16 - z));
  const __m512i table = biased_values();
  for (int64_t v = 0; v < count; v += 16) {
    const int64_t words = std::min<int64_t>(count - v, 16);
    const __mmask16 m = _mm512_cmplt_epi32_mask(order, _mm512_set1_epi32(int32_t(words)));
    const __m512i w =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, index, q + v * stride, 4);
    const __m512i lo = _mm512_add_epi8(_mm512_and_si512(w, low4), bias);
    const __m512i hi = _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi32(w, 4), low4), bias);
    const __m512i a = _mm512_unpacklo_epi8(lo, hi), b = _mm512_unpackhi_epi8(lo, hi);
    const __m256i parts[4] = {_mm512_castsi512_si256(a), _mm512_castsi512_si256(b),
                              _mm512_extracti64x4_epi64(a, 1), _mm512_extracti64x4_epi64(b, 1)};
    for (int j = 0; j < 4 && 32 * j < 8 * words; ++j) {
      const int64_t c = std::min<int64_t>(8 * words - 32 * j, 32);
      const __mmask32 sm = c == 32 ? ~__mmask32(0) : (__mmask32(1) << c) - 1;
      _mm512_mask_storeu_epi16(dst + 8 * v + 32 * j, sm,
                               _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(parts[j]), table));
    }
  }
}

#else

namespace {

// AVX2: the same words, one at a time: its 8 nibbles shifted into 8 lanes, minus z, converted to
// float32 (exact) and cut to their high halves, the exact bf16 bits. VPACKUSDW packs two words'
// lanes within 16-byte halves (word a's 0-3, b's 0-3, a's 4-7, b's 4-7); VPERMQ restores the order.
void words_to_bf16(const uint32_t* q, int64_t stride, int64_t count, int z, uint16_t* dst) {
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i low4 = _mm256_set1_epi32(15), zero = _mm256_set1_epi32(z);
  const auto bits = [&](int64_t v) {
    const __m256i n = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(int32_t(q[v * stride])), shifts), low4);
    return _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_sub_epi32(n, zero))),
                             16);
  };
  int64_t v = 0;
  for (; v + 2 <= count; v += 2)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8 * v),
                        _mm256_permute4x64_epi64(_mm256_packus_epi32(bits(v), bits(v + 1)), 0xd8));
  if (v < count)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 8 * v),
                     _mm256_castsi256_si128(
                         _mm256_permute4x64_epi64(_mm256_packus_epi32(bits(v), bits(v)), 0xd8)));
}

#endif

// The weight for the bf16 tiles, in packed-input order (x gathered to match): each group one
// scale block.
struct Int4Rows final : ScaledRows {
  const Int4WeightView& w;
  explicit Int4Rows(const Int4WeightView& v) : w(v) {
    rows = w.rows, cols = w.words * 8, blocks = w.groups;
    bytes = reinterpret_cast<const char*>(w.qweight), row_bytes = w.words * 4;
  }
  int64_t block_start(int64_t b) const override { return int64_t(w.group_words[b]) * 8; }
  void decode(int64_t r0, int mr, int64_t ld, uint16_t* dst, float* scales,
              int64_t stride) const override {
    for (int i = 0; i < mr; ++i) {
      const int64_t r = r0 + i, width = int4_block_width(w.rows, r - r % kInt4Block);
      for (int64_t g = 0; g < w.groups; ++g) {
        const int64_t v0 = w.group_words[g], e = int4_offset(w.layout, w.rows, w.groups, r, g);
        words_to_bf16(w.qweight + int4_offset(w.layout, w.rows, w.words, r, v0), width,
                      w.group_words[g + 1] - v0, w.zeros[e], dst + i * ld + 8 * v0);
        scales[g * stride + i] = half_to_f32(w.scales[e]);
      }
    }
  }
};

}  // namespace

bool matmul_int4_blocked_bf16(const float* x, int64_t n, const Int4WeightView& w,
                              const WeightView* bias, float* out, const MatmulOptions& opt) {
  AlignedArray<float> gathered;
  const Int4Rows rows(w);
  const ScaledTarget t{&rows, bias, out};
  matmul_blocked_scaled(packed_int4_input(x, n, w, gathered), n, {&t, 1}, opt);
  return true;
}

#else  // AVX-512 without VDPBF16PS, or no AVX2: the float32 panel GEMM serves

bool matmul_int4_blocked_bf16(const float*, int64_t, const Int4WeightView&, const WeightView*,
                              float*, const MatmulOptions&) {
  return false;
}

#endif

}  // namespace qmpi::cpu
