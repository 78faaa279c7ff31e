// The line every rank prints at start: the planner's memory prediction for the rank (the same
// PlanInputs as the launch pre-flight) next to what the rank measured, so that a wrong
// constant in the memory model shows up on the first run on a new machine.
#pragma once
#include <cstdint>
#include <string>

#include "engine/device_memory.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "plan/memory_model.h"

namespace qmpi {

struct PredictedMemory {
  RankMemory rank;  // weights, activations, overhead; kv_cache as kv_blocks below
  int64_t kv_blocks = 0;
  // Set when the KV cache takes what the budget leaves (CUDA without --kv-blocks): the rank's
  // share of in.gpu_mem x in.gpu_util, as cuda::plan_kv_blocks computes it.
  bool kv_from_budget = false;
  uint64_t budget = 0;
  double gpu_util = 0.0;
  int ranks_per_device = 1;
};

// rank_memory() for `plan`. On CUDA without --kv-blocks and with in.gpu_mem known, the KV cache
// is the whole blocks that fit in gpu_mem x gpu_util / ranks_per_device after the weights,
// activations and overhead (none when they do not fit); otherwise kv_cache_tokens() of them.
PredictedMemory predict_rank_memory(const ModelConfig& cfg, const ShardPlan& plan,
                                    const PlanInputs& in, int ranks_per_device);

// "memory predicted / actual: weights 942.3 / 942.3 MiB, workspace ..., KV cache ... blocks;
// budget ..." — one line, no rank tag (the engine adds it).
std::string memory_report_line(const PredictedMemory& predicted, const MeasuredMemory& actual);

}  // namespace qmpi
