#include "engine/context_limit.h"

#include <string>

#include "core/errors.h"

namespace qmpi {

void check_context_fits(int64_t prompt_tokens, int64_t max_tokens, int64_t max_model_len) {
  if (prompt_tokens + max_tokens <= max_model_len) return;
  raise(Err::PromptTooLong,
        "this model's maximum context length is " + std::to_string(max_model_len) +
            " tokens (--max-model-len), but the prompt has " + std::to_string(prompt_tokens) +
            " tokens and " + std::to_string(max_tokens) + " more are requested (" +
            std::to_string(prompt_tokens + max_tokens) + " in all)",
        "Shorten the prompt or lower max_tokens, or raise --max-model-len (with rope_scaling "
        "for a context longer than the model was trained for).");
}

}  // namespace qmpi
