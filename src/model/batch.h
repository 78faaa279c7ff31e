// One forward step's tokens, flattened: what every rank of a stage needs to run its layers.
// Built from a StepPlan (src/engine/step_plan.h); all arrays are host memory.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace qmpi {

// The rows of a step that one LoRA adapter runs on (its index in Linear::lora), in row order.
struct LoraRows {
  int32_t adapter = 0;
  std::vector<int32_t> rows;
};

struct BatchInput {
  std::vector<int32_t> tokens;     // [T] token ids (used by the first stage)
  std::vector<int32_t> positions;  // [T] position of each token in its sequence
  std::vector<int32_t> slots;      // [T] KV cache slot of each token
  std::vector<AttentionSeq> seqs;  // one per sequence
  std::vector<int32_t> block_tables;
  std::vector<int32_t> logit_rows;  // rows of the batch whose logits the step needs
  std::vector<LoraRows> lora;       // one per adapter the step uses; base-model rows in none

  int64_t num_tokens() const { return int64_t(tokens.size()); }
};

// What a backend may key a recording of the step on (Backend::run_step).
inline StepShape shape_of(const BatchInput& b) {
  StepShape s;
  s.tokens = b.num_tokens();
  s.decode =
      int64_t(b.seqs.size()) == s.tokens &&
      std::all_of(b.seqs.begin(), b.seqs.end(), [](const AttentionSeq& q) { return q.q_len == 1; });
  for (const AttentionSeq& q : b.seqs) s.max_context = std::max(s.max_context, q.ctx_len);
  return s;
}

}  // namespace qmpi
