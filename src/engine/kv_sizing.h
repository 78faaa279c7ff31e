// How many KV blocks the job allocates: the fixed counts (--kv-blocks, or max-num-seqs
// sequences of max-model-len), the shape of the profiling step a device backend measures its
// workspace with, and the agreement of all ranks on one count.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "parallel/comm.h"
#include "parallel/placement.h"

namespace qmpi {

// max_num_seqs sequences of max_model_len tokens, in whole blocks: the CPU cache (and what the
// planner assumes without --kv-blocks).
int64_t blocks_for_sequences(int64_t max_num_seqs, int64_t max_model_len, int block_size);

// The CPU cache's default budget (--kv-cache-memory): this share of the host's MemAvailable,
// split evenly over the job's ranks on that host.
inline constexpr double kCpuKvMemoryShare = 0.4;
// Ranks placed on the same host as `rank` (>= 1).
int ranks_on_host(const std::vector<Placement>& placements, int rank);
// The CPU cache's blocks: as many as `budget_bytes` holds, but no more than max_num_seqs
// sequences of max_model_len can use. Its memory is mapped lazily (CpuBackend::alloc_zeroed),
// so the count costs nothing until blocks are written. Raises KvCacheDoesNotFit when the budget
// cannot hold one max_model_len sequence.
int64_t cpu_kv_blocks(uint64_t budget_bytes, uint64_t bytes_per_block, int64_t max_num_seqs,
                      int64_t max_model_len, int block_size);

// The largest step the engine will run. batch and serve never schedule more than
// --max-batched-tokens tokens (max_step_tokens) per step; run, bench and logits prefill a
// whole prompt in one step, so without max_step_tokens it is max(max_model_len, max_num_seqs).
// Logits are computed for one row per sampled sequence, at most max_num_seqs; with speculative
// decoding, for its last real token and each of its `speculative_tokens` guesses.
struct ProfileShape {
  int64_t tokens = 0;
  int64_t logit_rows = 0;
};
ProfileShape profile_shape(int64_t max_step_tokens, int64_t max_model_len, int64_t max_num_seqs,
                           int32_t speculative_tokens = 0);

// Ranks placed on the same device of the same host as `rank` (>= 1; 1 on CPU).
int ranks_sharing_device(const std::vector<Placement>& placements, int rank);

// Every rank holds the same block table, so the job uses the smallest count any rank has room
// for. per_rank[r] < 1 means rank r could not size its cache (it raised an error).
struct KvBlockChoice {
  int64_t blocks = 0;
  int limiting_rank = -1;  // the rank with the least room
  int failed_rank = -1;    // the first rank that raised, -1 when none did
};
KvBlockChoice choose_kv_blocks(std::span<const int64_t> per_rank);

// Collective over `world`: runs size_this_rank() on this rank, gathers every rank's count and
// returns the smallest. When a rank's sizing raises a user-facing error (not enough memory, a
// bad --gpu-memory-utilization), every rank raises that rank's error, its message prefixed
// with `rank_tag` of that rank: rank 0 then reports it once and no rank is left waiting.
// Other errors (a CUDA failure) propagate at once and abort the job as usual.
int64_t agree_on_kv_blocks(Comm& world, const std::string& rank_tag,
                           const std::function<int64_t()>& size_this_rank);

}  // namespace qmpi
