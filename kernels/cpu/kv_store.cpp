#include "kernels/cpu/kv_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/errors.h"
#include "kernels/kv_dtype.h"

namespace qmpi::cpu {
namespace {

// One token's vector of one KV head (d values of x) into element `at` of `pool`.
void encode(const float* x, int32_t d, DType t, void* pool, int64_t at, float* scale) {
  if (t == DType::F32) {
    std::memcpy(static_cast<float*>(pool) + at, x, size_t(d) * sizeof(float));
  } else if (t == DType::BF16) {
    uint16_t* dst = static_cast<uint16_t*>(pool) + at;
    for (int32_t c = 0; c < d; ++c) dst[c] = f32_to_bf16(x[c]);
  } else {
    float amax = 0.0f;
    for (int32_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(x[c]));
    const float s = e4m3_scale(amax);
    uint8_t* dst = static_cast<uint8_t*>(pool) + at;
    for (int32_t c = 0; c < d; ++c) dst[c] = f32_to_e4m3(x[c] / s);
    *scale = s;
  }
}

}  // namespace

void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
              const KvLayerView& kv) {
  const int32_t d = kv.head_dim, heads = kv.num_kv_heads;
  const int64_t slots_total = kv.num_blocks * kv.block_size;
  if (!is_kv_dtype(kv.dtype))
    raise(Err::Internal, "kv_store into a " + std::string(dtype_name(kv.dtype)) + " cache");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = slots[i];
    if (s < 0 || s >= slots_total)
      raise(Err::Internal, "kv_store slot " + std::to_string(s) + " for token " +
                               std::to_string(i) + " is outside the cache's " +
                               std::to_string(slots_total) + " slots");
    for (int32_t h = 0; h < heads; ++h) {
      const int64_t vec = s * heads + h, src = (i * heads + h) * d;
      encode(k + src, d, kv.dtype, kv.k, vec * d, kv.k_scale ? kv.k_scale + vec : nullptr);
      encode(v + src, d, kv.dtype, kv.v, vec * d, kv.v_scale ? kv.v_scale + vec : nullptr);
    }
  }
}

}  // namespace qmpi::cpu
