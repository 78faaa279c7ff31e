// Prompt logits for `qmpi logits`: one sequence straight on the Executor, without the
// scheduler, on rank 0, with every position's logits (the scheduler samples only the last).
// Requests (run, batch, serve, bench) go through the request pipeline and the scheduler
// instead (pipeline.h).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/block_manager.h"
#include "engine/executor.h"

namespace qmpi {

enum class PrefillMode { Whole, Incremental, Chunked };

// Logits of every prompt position, [prompt.size(), vocab], computed in one prefill, one token
// per step (incremental) or in chunks of `chunk` tokens, with LoRA adapter `adapter` (-1: none).
std::vector<float> prompt_logits(Executor& ex, BlockManager& blocks,
                                 const std::vector<int32_t>& prompt, PrefillMode mode,
                                 int64_t chunk, int32_t adapter = -1);

}  // namespace qmpi
