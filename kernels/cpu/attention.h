// Causal grouped-query attention over the paged KV cache, for a batch of sequences that mixes
// prefill (many new tokens) and decode (one new token).
#pragma once
#include "kernels/kernel_types.h"

namespace qmpi::cpu {

// out[rows, heads, head_dim] = softmax(q . K^T * scale) . V per query head, where query head j
// reads KV head kv_head_for(batch, j) (kernel_types.h) and new token i of a sequence sees its keys
// 0 .. ctx_len - q_len + i. Softmax in float32 with the row maximum subtracted. Inconsistent
// batch metadata (block ids outside the pool, q_len > ctx_len, ...) raises Err::Internal.
// bf16_decode (`--dtype auto`): decode rows (q_len 1) over a bf16 or fp8 cache with head_dim a
// multiple of 32 round their scaled queries and softmax weights to bf16 and multiply with
// VDPBF16PS, reading the cache's elements as stored; each output is then within 2^-8 of the
// largest |value| of the exact result for the rounded queries. Off (`--dtype float32`), every
// row takes the exact float32 path.
void attention(const float* q, const AttentionBatch& batch, const KvLayerView& kv, float* out,
               int threads, bool bf16_decode = false);

}  // namespace qmpi::cpu
