// vLLM's utility endpoints beside the OpenAI ones: POST /tokenize, POST /detokenize and
// GET /version, with vLLM's request and response shapes. /tokenize renders a chat request's
// messages exactly as /v1/chat/completions does, so its count equals that request's
// usage.prompt_tokens.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "requests/sequence_spec.h"

namespace qmpi {

// {"prompt": str | [ids], "add_special_tokens"?} or {"messages", "add_generation_prompt"?,
// "tools"?, "chat_template_kwargs"?, ...}, either with "model"? and "return_token_strs"?
// -> {"count", "max_model_len", "tokens", "token_strs"}. Raises RequestJson, RequestField,
// ModelNotFound.
std::string tokenize_response(std::string_view body, const ModelFacts& model,
                              int64_t max_model_len);
// {"tokens": [ids], "model"?} -> {"prompt": text}.
std::string detokenize_response(std::string_view body, const ModelFacts& model);
// {"version": "<qmpi's version>"}
std::string version_response();

}  // namespace qmpi
