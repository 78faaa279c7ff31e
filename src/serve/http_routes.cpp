#include "serve/http_routes.h"

#include "requests/served_model.h"
#include "serve/api_key.h"

namespace qmpi {

namespace {
constexpr std::string_view kModelPrefix = "/v1/models/";
}  // namespace

std::string model_id_of(std::string_view target) {
  return percent_decode(target_path(target).substr(kModelPrefix.size()));
}

std::string_view target_path(std::string_view target) {
  // Absolute form (RFC 9112 3.2.2), as a proxy sends it: "http://host:port/path?query".
  const size_t scheme = target.find("://");
  if (scheme != std::string_view::npos && target.find('/') > scheme) {
    const size_t path = target.find('/', scheme + 3);
    target = path == std::string_view::npos ? std::string_view("/") : target.substr(path);
  }
  return target.substr(0, target.find('?'));
}

HttpRoute match_route(std::string_view method, std::string_view target) {
  const std::string_view path = target_path(target);
  if (method == "OPTIONS")
    return match_route("POST", target) != HttpRoute::NotFound ||
                   match_route("GET", target) != HttpRoute::NotFound
               ? HttpRoute::Options
               : HttpRoute::NotFound;
  if (method == "POST") {
    if (path == "/v1/chat/completions") return HttpRoute::Chat;
    if (path == "/v1/completions") return HttpRoute::Completion;
    if (path == "/tokenize") return HttpRoute::Tokenize;
    if (path == "/detokenize") return HttpRoute::Detokenize;
  } else if (method == "GET" || method == "HEAD") {  // HEAD: GET's answer without its body
    if (path == "/version") return HttpRoute::Version;
    if (path == "/v1/models") return HttpRoute::Models;
    if (path.starts_with(kModelPrefix) && path.size() > kModelPrefix.size())
      return HttpRoute::Model;
    if (path == "/health") return HttpRoute::Health;
    if (path == "/metrics") return HttpRoute::Metrics;
  }
  return HttpRoute::NotFound;
}

bool needs_api_key(std::string_view path) {
  return path.substr(0, 4) == "/v1/";
}

bool bearer_matches(std::string_view header, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  // The scheme is no secret; the key part goes through the one constant-time comparison.
  if (header.substr(0, kScheme.size()) != kScheme) return false;
  return api_key_matches(header.substr(kScheme.size()), key);
}

Error not_found_error(std::string_view method, std::string_view target) {
  return Error(Err::RouteNotFound,
               std::string(method.substr(0, 20)) + " " + std::string(target.substr(0, 200)) +
                   " is not an endpoint of qmpi serve",
               "Use POST /v1/chat/completions, POST /v1/completions, GET /v1/models, POST "
               "/tokenize, POST /detokenize, GET /version, GET /health or GET /metrics.");
}

Error unauthorized_error(bool has_authorization_header) {
  return Error(Err::Unauthorized,
               has_authorization_header
                   ? "the Authorization header does not carry the server's API key"
                   : "the request has no Authorization header and the server needs an API key",
               "Send `Authorization: Bearer <key>` with the key given to --api-key.");
}

Error body_too_large_error(size_t limit) {
  return Error(Err::BodyTooLarge,
               "the request body is larger than --max-request-bytes " + std::to_string(limit),
               "Send a shorter prompt, or raise --max-request-bytes.");
}

Error unreadable_request_error(std::string_view why) {
  return Error(Err::RequestJson,
               "the HTTP request could not be read (" + std::string(why.substr(0, 200)) + ")",
               "Send an HTTP/1.1 request: a request line, headers, and a JSON body.");
}

}  // namespace qmpi
