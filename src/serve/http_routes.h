// What the HTTP front decides from a request's head alone, before it reads a body: which route
// the method and path name, whether the API key is needed and given, and the errors it answers
// with when not. No I/O here, so it is tested without sockets.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.h"

namespace qmpi {

// Model: GET /v1/models/{id}. Options: OPTIONS on any other route (what a browser asks first).
enum class HttpRoute : uint8_t {
  Chat,
  Completion,
  Models,
  Model,
  Health,
  Metrics,
  Tokenize,
  Detokenize,
  Version,
  Options,
  NotFound
};

// "/v1/models?x=1" -> "/v1/models"; the absolute form "http://h:8000/v1/models" too.
std::string_view target_path(std::string_view target);
// The route of `method` on `target` (query string ignored; HEAD as GET); NotFound for any
// other pair.
HttpRoute match_route(std::string_view method, std::string_view target);
// The {id} of GET /v1/models/{id}, percent-decoded ("Qwen%2FQwen3" and "Qwen/Qwen3" alike).
std::string model_id_of(std::string_view target);
// Routes under /v1/ need the key; /health and /metrics stay open for probes.
bool needs_api_key(std::string_view path);
// `header` is exactly "Bearer <key>" (compared in constant time: the key is a secret).
bool bearer_matches(std::string_view header, std::string_view key);

Error not_found_error(std::string_view method, std::string_view target);
Error unauthorized_error(bool has_authorization_header);
Error body_too_large_error(size_t limit);
// A request that is not HTTP/1.x the parser can read (`why` is the parser's word for it).
Error unreadable_request_error(std::string_view why);

}  // namespace qmpi
