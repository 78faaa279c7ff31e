// The element types the paged KV cache holds (KvLayerView::dtype) and the bytes they take.
//
// fp8 (e4m3) keeps one float32 scale per token and KV head, set when the vector is stored
// (its largest |x| / 448), instead of one scale per head for the whole cache: a per-head scale
// has to be known before the first token (a calibration pass, or rescaling every stored vector
// when a larger value arrives), while a per-vector one needs nothing beforehand, uses the full
// e4m3 range for every vector (a relative error of at most 2^-4 per element, whatever the
// outliers of other tokens) and costs 4 bytes per head_dim bytes (3% at head_dim 128).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace qmpi {

inline bool is_kv_dtype(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F8_E4M3;
}

// How --kv-dtype names it: f32, bf16 or fp8.
inline const char* kv_dtype_name(DType t) {
  return t == DType::F32 ? "f32" : t == DType::BF16 ? "bf16" : "fp8";
}

// Bytes of one token's K (or V) vector of one KV head, its fp8 scale included.
inline uint64_t kv_vector_bytes(DType t, int64_t head_dim) {
  return uint64_t(head_dim) * dtype_size(t) + (t == DType::F8_E4M3 ? sizeof(float) : 0);
}

// fp8's per-vector scale for a vector whose largest |x| is `amax` (1 for an all-zero vector,
// which any scale stores exactly).
inline float e4m3_scale(float amax) {
  return amax > 0.0f ? amax / kE4m3Max : 1.0f;
}

}  // namespace qmpi
