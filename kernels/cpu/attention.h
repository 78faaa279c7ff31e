// Causal grouped-query attention over the paged KV cache, for a batch of sequences that mixes
// prefill (many new tokens) and decode (one new token).
#pragma once
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// out[rows, heads, head_dim] = softmax(q . K^T * scale) . V per query head, where query head j
// reads KV head kv_head_for(batch, j) (kernel_types.h) and new token i of a sequence sees its keys
// 0 .. ctx_len - q_len + i. Softmax in float32 with the row maximum subtracted. Inconsistent
// batch metadata (block ids outside the pool, q_len > ctx_len, ...) raises Err::Internal.
void attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv, float* out,
               int threads);

}  // namespace qmpi::cpu
