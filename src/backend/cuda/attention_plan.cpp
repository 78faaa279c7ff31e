#include "backend/cuda/attention_plan.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "kernels/cuda/launch_shapes.h"

namespace qmpi::cuda {

AttentionPlan plan_attention(const AttentionBatch& b, const KvLayerView& kv) {
  if (!heads_are_grouped(b) || b.num_kv_heads != kv.num_kv_heads || b.head_dim != kv.head_dim ||
      kv.block_size <= 0)
    raise(Err::Internal, "attention over " + std::to_string(b.num_heads) + " heads / " +
                             std::to_string(b.num_kv_heads) + " KV heads of dim " +
                             std::to_string(b.head_dim) + " does not match a cache of " +
                             std::to_string(kv.num_kv_heads) + " KV heads of dim " +
                             std::to_string(kv.head_dim));
  if (b.head_dim > kAttentionMaxHeadDim)
    raise(Err::ArchUnsupported,
          "head_dim " + std::to_string(b.head_dim) +
              " is larger than the CUDA attention kernel's " + std::to_string(kAttentionMaxHeadDim),
          "Run this model with --backend cpu.");

  AttentionPlan p;
  for (int32_t s = 0; s < b.num_seqs; ++s) {
    const AttentionSeq& seq = b.seqs[s];
    if (seq.q_len < 0 || seq.q_len > seq.ctx_len || seq.q_begin < 0 || seq.table_begin < 0)
      raise(Err::Internal, "attention sequence " + std::to_string(s) + " has " +
                               std::to_string(seq.q_len) + " new tokens at row " +
                               std::to_string(seq.q_begin) + " in a context of " +
                               std::to_string(seq.ctx_len));
    const int32_t blocks = (seq.ctx_len + kv.block_size - 1) / kv.block_size;
    for (int32_t j = 0; j < blocks; ++j) {
      const int32_t id = b.block_tables[seq.table_begin + j];
      if (id < 0 || id >= kv.num_blocks)
        raise(Err::Internal, "attention sequence " + std::to_string(s) + " names block " +
                                 std::to_string(id) + " of a pool of " +
                                 std::to_string(kv.num_blocks));
    }
    p.table_entries = std::max<int64_t>(p.table_entries, int64_t(seq.table_begin) + blocks);
    p.rows = std::max<int64_t>(p.rows, int64_t(seq.q_begin) + seq.q_len);
    if (seq.q_len > 0) p.max_keys = std::max(p.max_keys, seq.ctx_len);
  }
  for (int32_t h = 0; h < b.num_heads; ++h) p.kv_head_of.push_back(kv_head_for(b, h));
  p.row_seq.assign(size_t(p.rows), -1);
  for (int32_t s = 0; s < b.num_seqs; ++s) {
    const AttentionSeq& seq = b.seqs[s];
    for (int32_t i = 0; i < seq.q_len; ++i) {
      int32_t& owner = p.row_seq[size_t(seq.q_begin + i)];
      if (owner >= 0)
        raise(Err::Internal, "attention sequences " + std::to_string(owner) + " and " +
                                 std::to_string(s) + " both claim query row " +
                                 std::to_string(seq.q_begin + i));
      owner = s;
    }
  }
  return p;
}

}  // namespace qmpi::cuda
