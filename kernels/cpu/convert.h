// Weight elements (BF16/F16/F32) as float32, for kernels that widen a row at a time.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/aligned.h"
#include "kernels/kernel_types.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace qmpi::cpu {

inline float half_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// Element i of a BF16, F16 or F32 array.
inline float load_as_f32(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F16:
      return half_to_f32(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// dst[0, count) = src as float32; src is BF16, F16 or F32.
void convert_to_f32(const void* src, DType t, int64_t count, float* dst);

// A bias (or any 1-D weight) as a float32 array; null when `v` is null.
AlignedArray<float> widen(const WeightView* v);

// dst = src rounded to the nearest bf16 (ties to even), kept as float32: what a bf16
// dot product sees of an activation.
void round_to_bf16(const float* src, int64_t count, float* dst);

// dst[0, count) = src rounded to bf16 as f32_to_bf16 does (ties to even, NaN kept quiet), 16 at
// a time where the CPU has AVX-512: a decode step rounds ~180k activations for the bf16 dot
// products, serially before each GEMV's parallel region, so the scalar loop showed in profiles.
void to_bf16(const float* src, int64_t count, uint16_t* dst);

}  // namespace qmpi::cpu
