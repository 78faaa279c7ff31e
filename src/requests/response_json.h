// A request's final output as OpenAI JSON: the response body an HTTP server answers, and the
// result lines in the OpenAI Batch output shape:
//   {"id", "custom_id", "response": {"status_code": 200, "request_id", "body": <chat.completion
//    or text_completion with choices and usage>}, "error": null}
// and for a request that could not run, as OpenAI writes it:
//   {"id", "custom_id", "response": null, "error": {"code": "QM501", "message": ...}}
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "requests/events.h"
#include "requests/message_shaper.h"
#include "text/tokenizer.h"

namespace qmpi {

// One JSON line (no newline). `token_ids` adds "prompt_token_ids" to the body and "token_ids"
// to each choice (qmpi extensions; the test suite compares ids).
std::string success_line(const RequestOutput& out, const Tokenizer& tokenizer, bool token_ids);
// The body alone (chat.completion or text_completion, its "id" from key), as an HTTP
// server answers it.
std::string response_body(const RequestOutput& out, const Tokenizer& tokenizer, bool token_ids);
// OpenAI's pieces of a chat answer: {"id", "type": "function", "function": {"name",
// "arguments"}} and the assistant message (content, reasoning_content when the format parses
// it, tool_calls when there are some).
nlohmann::ordered_json tool_call_json(const ToolCall& call);
// One token of a chat answer's "logprobs": {"content": [...]}: {"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}]}.
nlohmann::ordered_json chat_logprob_entry(const Tokenizer& tok, int32_t token, float logprob,
                                          std::span<const TokenLogprob> top);
// A completion's "logprobs" for these tokens, the first at text offset `offset`: {"tokens",
// "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
nlohmann::ordered_json completion_logprobs_json(const Tokenizer& tok,
                                                std::span<const int32_t> tokens,
                                                std::span<const float> logprobs,
                                                std::span<const std::vector<TokenLogprob>> top,
                                                size_t offset);
nlohmann::ordered_json assistant_message(const ShapedMessage& m, const OutputFormat& format);

std::string error_line(int64_t line_no, const std::string& custom_id, const Error& error);

}  // namespace qmpi
