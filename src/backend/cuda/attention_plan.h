// The host half of a CUDA attention call: checks the batch against the cache (the same checks,
// and Err::Internal, as the CPU backend) and works out what the kernel needs uploaded.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qmpi::cuda {

struct AttentionPlan {
  int64_t rows = 0;                 // query rows the batch covers: max(q_begin + q_len)
  std::vector<int32_t> row_seq;     // [rows]: the sequence of each row, -1 for rows of none
  int64_t table_entries = 0;        // block-table ints the kernel reads (from the start)
  std::vector<int32_t> kv_head_of;  // [heads]: the KV head each query head reads
  int32_t max_keys = 0;             // the longest context: what a flash-decoding split divides
};

AttentionPlan plan_attention(const AttentionBatch& batch, const KvLayerView& kv);

}  // namespace qmpi::cuda
