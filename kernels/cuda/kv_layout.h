// Where a token's keys and values live in the paged KV cache. The layout is the one the CPU
// backend uses (backend/backend.h, KvLayerView): each layer has a K and a V pool of
// [num_blocks, block_size, kv_heads, head_dim] elements (F32, BF16 or e4m3), and a token's slot
// is block_id * block_size + offset_in_block.
#pragma once
#include <cstdint>

#include "kernels/cuda/host_device.h"

namespace qmpi::cuda {

// Slot of the token at `position` of a sequence whose block table is `table`.
QMPI_HD inline int64_t kv_slot(const int32_t* table, int32_t position, int32_t block_size) {
  return int64_t(table[position / block_size]) * block_size + position % block_size;
}

// Offset (in elements) of head `kv_head`'s vector for `slot` inside one pool.
QMPI_HD inline int64_t kv_offset(int64_t slot, int32_t kv_head, int32_t kv_heads,
                                 int32_t head_dim) {
  return (slot * kv_heads + kv_head) * head_dim;
}

// A new token i of a sequence with q_len new tokens and ctx_len keys (past + new) sits at
// position ctx_len - q_len + i and, causally, sees keys 0 .. that position.
QMPI_HD inline int32_t query_position(int32_t ctx_len, int32_t q_len, int32_t i) {
  return ctx_len - q_len + i;
}

}  // namespace qmpi::cuda
