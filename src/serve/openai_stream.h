// OpenAI-compatible pieces of the HTTP front: server-sent-event chunks of a streamed chat or
// completion ("data: {...}\n\n" ... "data: [DONE]\n\n"), error bodies and their HTTP statuses.
#pragma once
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "requests/message_shaper.h"
#include "requests/request_parser.h"
#include "requests/response_json.h"
#include "serve/serve_event.h"

namespace qmpi {

// What every chunk of one streamed response repeats.
struct StreamShape {
  Endpoint endpoint = Endpoint::Chat;
  std::string id;  // "chatcmpl-7" / "cmpl-7"
  int64_t created = 0;
  std::string model;
  bool token_ids = false;  // add each delta's "token_ids" (qmpi extension, return_token_ids)
  uint64_t number = 0;     // the response's number (the hub's ticket), in tool call ids
  OutputFormat format;     // chat: reasoning and tool calls (message_shaper.h)
  // Deltas carry their tokens' logprobs (the request asked); token strings come from here.
  bool logprobs = false;
  const Tokenizer* tokenizer = nullptr;
};

std::string sse_role_chunk(const StreamShape& s, int32_t index);  // chat: {"role": "assistant"}
// "" when the delta has nothing to show (no text, no token ids or logprobs asked for).
// `text_offset`: completions' logprobs, where the delta's first token starts in the text.
std::string sse_delta_chunk(const StreamShape& s, const ServeEvent& delta, size_t text_offset = 0);
// Chat: one chunk with the parts of `m` (reasoning_content, content, tool_calls numbered from
// `first_call`), and `d`'s token ids when asked for; "" when there is nothing to send.
std::string sse_chat_chunk(const StreamShape& s, int32_t index, const MessageDelta& m,
                           size_t first_call, const ServeEvent* d);
std::string sse_finish_chunk(const StreamShape& s, int32_t index, const std::string& reason);
std::string sse_usage_chunk(const StreamShape& s, const RequestOutput& out);
std::string sse_error_chunk(const Error& e);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// {"error": {"message", "type", "param", "code", "qmpi_code": "QM501"}}: openai_error_object
// with the catalogue's id besides.
std::string http_error_body(const Error& e);
int http_status(Err code);  // 400, 401, 404, 413, 501, 503 or 500

}  // namespace qmpi
