// One forward step's tokens, flattened: what every rank of a stage needs to run its layers.
// Built from a StepPlan (src/engine/step_plan.h); all arrays are host memory.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

struct BatchInput {
  std::vector<int32_t> tokens;     // [T] token ids (used by the first stage)
  std::vector<int32_t> positions;  // [T] position of each token in its sequence
  std::vector<int32_t> slots;      // [T] KV cache slot of each token
  std::vector<AttentionSeq> seqs;  // one per sequence
  std::vector<int32_t> block_tables;
  std::vector<int32_t> logit_rows;  // rows of the batch whose logits the step needs

  int64_t num_tokens() const { return int64_t(tokens.size()); }
};

}  // namespace qmpi
