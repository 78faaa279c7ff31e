#include "kernels/cpu/kv_store.h"

#include <cstring>
#include <string>

#include "core/errors.h"

namespace qmpi::cpu {

void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
              const KvLayerView& kv) {
  const int64_t row = int64_t(kv.num_kv_heads) * kv.head_dim;
  const int64_t slots_total = kv.num_blocks * kv.block_size;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = slots[i];
    if (s < 0 || s >= slots_total)
      raise(Err::Internal, "kv_store slot " + std::to_string(s) + " for token " +
                               std::to_string(i) + " is outside the cache's " +
                               std::to_string(slots_total) + " slots");
    std::memcpy(kv.k + s * row, k + i * row, size_t(row) * sizeof(float));
    std::memcpy(kv.v + s * row, v + i * row, size_t(row) * sizeof(float));
  }
}

}  // namespace qmpi::cpu
