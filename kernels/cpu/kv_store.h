// Appending new keys and values to the paged KV cache.
#pragma once
#include <cstdint>

#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// Writes k/v[n, kv_heads, head_dim] into the cache at slots[n] (slot = block * block_size +
// offset in block). A slot outside the pool raises Err::Internal: the scheduler handed out a
// block that does not exist.
void kv_store(const float* k, const float* v, int64_t n, const int32_t* slots,
              const KvLayerView& kv);

}  // namespace qmpi::cpu
