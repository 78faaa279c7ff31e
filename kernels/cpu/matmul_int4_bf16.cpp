// The int4 prefill with bf16 activations: the bf16 GEMM's tiles (matmul_blocked.cpp) on rows
// decoded to bf16 q - z, an integer in [-16, 15] and so exact in bf16, with each group's partial
// sums multiplied by the row's scale for that group as they are added up (scaled_rows.h). The
// only rounding beyond float32 sums is x's to bf16, as for bf16 weights. On AVX2 the same rows
// take the float32 tiles, widened (matmul_blocked_scaled).
#include <algorithm>
#include <vector>

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
  static const __m512i t = bf16_int_words(-16);
  return t;
}

// A row's decode takes its 16 words with word kWordOrder[p] in lane p: the unpacking below works
// within 16-byte lanes, so the lanes' low halves then interleave to words 0-3 and 8-11, their
// high halves to 4-7 and 12-15.
alignas(64) constexpr int32_t kWordOrder[16] = {0, 1, 4,  5,  2,  3,  6,  7,
                                                8, 9, 12, 13, 10, 11, 14, 15};

// `words` (<= 16) of a row's words, in kWordOrder, as the bf16 bits of their nibbles minus z into
// dst[0 .. 8 words): the nibbles split into low and high bytes, each plus its word's 16 - z
// (`bias`, per byte), interleaved by VPUNPCKL/HBW, widened to 16 bits and looked up in
// biased_values() by VPERMW.
inline void row_words_to_bf16(__m512i w, __m512i bias, int64_t words, __m512i table,
                              uint16_t* dst) {
  const __m512i low4 = _mm512_set1_epi8(15);
  const __m512i lo = _mm512_add_epi8(_mm512_and_si512(w, low4), bias);
  const __m512i hi = _mm512_add_epi8(_mm512_and_si512(_mm512_srli_epi32(w, 4), low4), bias);
  const __m512i a = _mm512_unpacklo_epi8(lo, hi), b = _mm512_unpackhi_epi8(lo, hi);
  const __m256i parts[4] = {_mm512_castsi512_si256(a), _mm512_castsi512_si256(b),
                            _mm512_extracti64x4_epi64(a, 1), _mm512_extracti64x4_epi64(b, 1)};
  for (int j = 0; j < 4 && 32 * j < 8 * words; ++j) {
    const int64_t c = std::min<int64_t>(8 * words - 32 * j, 32);
    const __mmask32 sm = c == 32 ? ~__mmask32(0) : (__mmask32(1) << c) - 1;
    _mm512_mask_storeu_epi16(dst + 32 * j, sm,
                             _mm512_permutexvar_epi16(_mm512_cvtepu8_epi16(parts[j]), table));
  }
}

// Rows [r0, r0 + mr) of a Blocks16 weight, every word, as bf16 q - z at dst[(r - r0) * ld + k]:
// for each run of the rows in one 16-row block, 16 words at a time, the block's word vectors
// (one 64-byte load each: that word of all the block's rows) loaded in kWordOrder and transposed
// in registers, so that vector l holds row l's words. A gather per row and 16 words (one cache
// line a word) took most of the decode, ~20% of an int4 prefill pass.
void rows_to_bf16(const Int4WeightView& w, int64_t r0, int mr, int64_t ld, uint16_t* dst) {
  const __m512i table = biased_values();
  const __m512i order = _mm512_load_si512(kWordOrder);
  for (int64_t r = r0; r < r0 + mr;) {
    const int64_t b0 = r - r % kInt4Block, width = int4_block_width(w.rows, b0);
    const int64_t end = std::min<int64_t>(r0 + mr, b0 + width);
    const uint32_t* qb = w.qweight + b0 * w.words;  // word u of row b0 + l at qb[u * width + l]
    const __mmask16 lanes = __mmask16((1u << width) - 1);
    int64_t g0 = 0;  // the first group with words in [v, v + 16)
    for (int64_t v = 0; v < w.words; v += 16) {
      const int64_t count = std::min<int64_t>(16, w.words - v);
      while (w.group_words[g0 + 1] <= v) ++g0;
      vec::F t[16];
      for (int k = 0; k < 16; ++k) {
        const float* at = reinterpret_cast<const float*>(qb + (v + kWordOrder[k]) * width);
        t[k] = kWordOrder[k] >= count ? _mm512_setzero_ps()
               : width == kInt4Block  ? _mm512_loadu_ps(at)
                                      : _mm512_maskz_loadu_ps(lanes, at);
      }
      vec::transpose(t);
      const __m512i word = _mm512_add_epi32(order, _mm512_set1_epi32(int32_t(v)));
      for (int64_t row = r; row < end; ++row) {
        const auto bias_of = [&](int64_t g) {
          const int z = w.zeros[int4_offset(w.layout, w.rows, w.groups, row, g)];
          return _mm512_set1_epi8(int8_t(16 - z));
        };
        __m512i bias = bias_of(g0);
        for (int64_t g = g0 + 1; g < w.groups && w.group_words[g] < v + count; ++g)
          bias = _mm512_mask_mov_epi32(
              bias, _mm512_cmpge_epi32_mask(word, _mm512_set1_epi32(w.group_words[g])), bias_of(g));
        row_words_to_bf16(_mm512_castps_si512(t[row - b0]), bias, count, table,
                          dst + (row - r0) * ld + 8 * v);
      }
    }
    r = end;
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
#if defined(__AVX512BF16__)
    rows_to_bf16(w, r0, mr, ld, dst);
#else
    for (int i = 0; i < mr; ++i) {
      const int64_t r = r0 + i, width = int4_block_width(w.rows, r - r % kInt4Block);
      for (int64_t g = 0; g < w.groups; ++g) {
        const int64_t v0 = w.group_words[g];
        words_to_bf16(w.qweight + int4_offset(w.layout, w.rows, w.words, r, v0), width,
                      w.group_words[g + 1] - v0,
                      w.zeros[int4_offset(w.layout, w.rows, w.groups, r, g)],
                      dst + i * ld + 8 * v0);
      }
    }
#endif
    for (int i = 0; i < mr; ++i)
      for (int64_t g = 0; g < w.groups; ++g)
        scales[g * stride + i] =
            half_to_f32(w.scales[int4_offset(w.layout, w.rows, w.groups, r0 + i, g)]);
  }
};

}  // namespace

bool matmul_int4_blocked_bf16(const float* x, int64_t n, std::span<const Int4Target> targets,
                              const MatmulOptions& opt) {
  std::vector<Int4Rows> rows;
  rows.reserve(targets.size());  // the targets point into it
  std::vector<ScaledTarget> ts;
  for (const Int4Target& t : targets) ts.push_back({&rows.emplace_back(t.w), t.bias, t.out});
  AlignedArray<float> gathered;  // the targets read x alike: gathered by the first's order
  matmul_blocked_scaled(packed_int4_input(x, n, targets[0].w, gathered), n, ts, opt);
  return true;
}

#else  // AVX-512 without VDPBF16PS, or no AVX2: the float32 panel GEMM serves

bool matmul_int4_blocked_bf16(const float*, int64_t, std::span<const Int4Target>,
                              const MatmulOptions&) {
  return false;
}

#endif

}  // namespace qmpi::cpu
