// One sequence straight on the Executor, without the scheduler, on rank 0: prompt logits (qmpi
// logits) and the timed generation of qmpi bench (prefill and decode apart). Requests (run,
// batch, serve) go through the request pipeline and the scheduler instead (pipeline.h).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/block_manager.h"
#include "engine/executor.h"
#include "engine/sampling_params.h"

namespace qmpi {

enum class PrefillMode { Whole, Incremental, Chunked };

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplingParams sampling;
  PrefillMode prefill = PrefillMode::Whole;
  int64_t chunk = 0;  // tokens per prefill step in Chunked mode
};

struct GenerateResult {
  std::vector<int32_t> output;
  double prefill_s = 0.0;  // wall time until the first token
  double decode_s = 0.0;   // wall time of the remaining tokens
};

// Exactly max_tokens tokens, whatever they are (end-of-sequence ids do not stop it): a fixed
// amount of work to time.
GenerateResult generate(Executor& ex, BlockManager& blocks, const GenerateRequest& req);

// Logits of every prompt position, [prompt.size(), vocab], computed in one prefill, one token
// per step (incremental) or in chunks of `chunk` tokens, with LoRA adapter `adapter` (-1: none).
std::vector<float> prompt_logits(Executor& ex, BlockManager& blocks,
                                 const std::vector<int32_t>& prompt, PrefillMode mode,
                                 int64_t chunk, int32_t adapter = -1);

}  // namespace qmpi
