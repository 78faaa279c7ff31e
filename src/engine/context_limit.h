// The one context-length check: every front (run, logits, batch, serve over HTTP and ZeroMQ)
// refuses a prompt plus max_tokens beyond --max-model-len with the same sentence, before any
// compute (Err::PromptTooLong: HTTP 400 context_length_exceeded, a batch error line).
#pragma once
#include <cstdint>

namespace qmpi {

// Raises Err::PromptTooLong when prompt + max_tokens > max_model_len.
void check_context_fits(int64_t prompt_tokens, int64_t max_tokens, int64_t max_model_len);

}  // namespace qmpi
