// What a draft model (--speculative-config "model") costs rank 0, for the planner and the
// launch pre-flight (memory_model.h, Draft model): its checkpoint's weights, whole, and its K and
// V per token in the target's KV dtype.
#pragma once
#include <string>

#include "plan/memory_model.h"

namespace qmpi {

// Sets in.draft_weights and in.draft_kv_per_token from the draft at `path` (its config.json and
// safetensors headers, or its .gguf), with in.kv_dtype. Nothing when `path` is empty.
void add_draft_model(PlanInputs& in, const std::string& path);

}  // namespace qmpi
