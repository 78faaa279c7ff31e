#include "kernels/cpu/convert.h"

#include <cstring>

#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

void convert_to_f32(const void* src, DType t, int64_t count, float* dst) {
  if (t == DType::F32) {
    std::memcpy(dst, src, size_t(count) * sizeof(float));
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= count; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m512 f = t == DType::BF16
                   ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                   : _mm512_cvtph_ps(h);
    _mm512_storeu_ps(dst + i, f);
  }
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

void round_to_bf16(const float* src, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(f32_to_bf16(src[i]));
}

}  // namespace qmpi::cpu
