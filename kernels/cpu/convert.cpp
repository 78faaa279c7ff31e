#include "kernels/cpu/convert.h"

#include <cstring>

#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

void convert_to_f32(const void* src, DType t, int64_t count, float* dst) {
  if (t == DType::F32) {
    std::memcpy(dst, src, size_t(count) * sizeof(float));
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
#if defined(QMPI_CPU_VEC)
  if (t == DType::BF16)
    for (; i + vec::kLanes <= count; i += vec::kLanes) vec::store(dst + i, vec::load_bf16(s + i));
  else
    for (; i + vec::kLanes <= count; i += vec::kLanes) vec::store(dst + i, vec::load_f16(s + i));
#endif
  if (t == DType::BF16) {
    for (; i < count; ++i) dst[i] = bf16_to_f32(s[i]);
  } else {
    for (; i < count; ++i) dst[i] = half_to_f32(s[i]);
  }
}

AlignedArray<float> widen(const WeightView* v) {
  if (!v) return nullptr;
  const int64_t count = v->rows * v->cols;
  AlignedArray<float> out = make_aligned<float>(size_t(count));
  convert_to_f32(v->data, v->dtype, count, out.get());
  return out;
}

void to_bf16(const float* src, int64_t count, uint16_t* dst) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= count; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, magnitude), inf);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
#endif
  for (; i < count; ++i) dst[i] = f32_to_bf16(src[i]);
}

void round_to_bf16(const float* src, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(f32_to_bf16(src[i]));
}

}  // namespace qmpi::cpu
