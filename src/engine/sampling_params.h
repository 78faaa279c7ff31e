// Per-request sampling settings, carried with every step to the last pipeline stage, where
// sampling happens next to the logits.
#pragma once
#include <cstdint>

namespace qmpi {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  int32_t top_k = -1;  // -1 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  int32_t top_logprobs = 0;  // alternatives to report with each sampled token (0 = none)

  bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace qmpi
