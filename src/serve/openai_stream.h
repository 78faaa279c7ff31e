// OpenAI-compatible pieces of the HTTP front: server-sent-event chunks of a streamed chat or
// completion ("data: {...}\n\n" ... "data: [DONE]\n\n"), error bodies and their HTTP statuses.
#pragma once
#include <cstdint>
#include <string>

#include "core/errors.h"
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
};

std::string sse_role_chunk(const StreamShape& s, int32_t index);  // chat: {"role": "assistant"}
// "" when the delta has no text and token ids are not asked for.
std::string sse_delta_chunk(const StreamShape& s, const ServeEvent& delta);
std::string sse_finish_chunk(const StreamShape& s, int32_t index, const std::string& reason);
std::string sse_usage_chunk(const StreamShape& s, const RequestOutput& out);
std::string sse_error_chunk(const Error& e);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// {"error": {"message", "type", "param", "code": "request-field", "qmpi_code": "QM501"}}
std::string http_error_body(const Error& e);
int http_status(Err code);  // 400, 401, 404, 413, 503 or 500

}  // namespace qmpi
