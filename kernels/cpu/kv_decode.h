// Reading the paged KV cache's vectors back for the attention kernels: one (token, KV head)
// vector of d elements of the cache's dtype at a time, as float32 (the exact path's prefill rows)
// or as bf16 (the decode paths), converted into a small buffer that the query heads sharing that KV
// head then read from L1.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/e4m3_simd.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/x86.h"

namespace qmpi::cpu {

// The d elements of `pool` (of type t) from element `at` on, as floats: f32 vectors in place,
// others decoded into buf[0..d), fp8 ones times `scale`, the vector's scale.
inline const float* kv_row(const void* pool, DType t, int64_t at, int32_t d, float scale,
                           float* buf) {
  if (t == DType::F32) return static_cast<const float*>(pool) + at;
  int32_t c = 0;
  if (t == DType::BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(pool) + at;
#if defined(QMPI_CPU_VEC)
    for (; c + vec::kLanes <= d; c += vec::kLanes) vec::store(buf + c, vec::load_bf16(src + c));
#endif
    for (; c < d; ++c) buf[c] = bf16_to_f32(src[c]);
  } else {
    const uint8_t* src = static_cast<const uint8_t*>(pool) + at;
#if defined(QMPI_CPU_VEC)
    // e4m3_load's values are the codes' times 2^-8, exactly; times scale * 2^8 they round once,
    // as e4m3_to_f32(code) * scale does (one call of which per element made an fp8 32k layer
    // 14x slower than a bf16 one on AVX2).
    const vec::F s = vec::splat(scale * 256.0f);
    for (; c + 2 * vec::kLanes <= d; c += 2 * vec::kLanes) {
      const E4m3Pair v = e4m3_load(src + c);
      vec::store(buf + c, vec::mul(v.lo, s));
      vec::store(buf + c + vec::kLanes, vec::mul(v.hi, s));
    }
#endif
    for (; c < d; ++c) buf[c] = e4m3_to_f32(src[c]) * scale;
  }
  return buf;
}

// The d elements of a bf16 or fp8 `pool` from element `at` on, as bf16: bf16 vectors in place,
// fp8 codes converted into buf[0..d) as their values times 2^-8, exactly (by `widen`, made once
// for many rows); the caller folds 2^8 into the vector's scale.
inline const uint16_t* kv_row_bf16(const void* pool, DType t, int64_t at, int32_t d, uint16_t* buf,
                                   const E4m3ToBf16& widen = {}) {
  if (t == DType::BF16) return static_cast<const uint16_t*>(pool) + at;
  widen(static_cast<const uint8_t*>(pool) + at, d, buf);
  return buf;
}

}  // namespace qmpi::cpu
