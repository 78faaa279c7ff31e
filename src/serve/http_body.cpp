#include "serve/http_body.h"

#include <nlohmann/json.hpp>

#include "requests/request_json.h"

namespace qmpi {

using json = nlohmann::ordered_json;

HttpBody parse_http_body(std::string_view text, Endpoint endpoint, std::string custom_id) {
  RequestJson parsed = parse_request_json(text, "the body");
  if (parsed.number_error) throw *parsed.number_error;  // an HTTP body has no id to echo
  json body = std::move(parsed.value);
  if (!body.is_object()) raise(Err::RequestJson, "the body is not a JSON object");
  HttpBody out;
  // Fields of the HTTP API that the shared request checker does not know.
  bool has_stream_options = false;
  if (body.contains("stream_options") && !body.at("stream_options").is_null()) {
    const json& so = body.at("stream_options");
    has_stream_options = true;
    if (!so.is_object())
      throw Error(Err::RequestField, "\"stream_options\" must be an object")
          .with_param("stream_options");
    for (const auto& [k, v] : so.items())
      if (k != "include_usage" || !v.is_boolean())
        throw Error(Err::RequestField,
                    "\"stream_options\" takes only \"include_usage\": true/false")
            .with_param("stream_options");
    out.include_usage = so.value("include_usage", false);
  }
  body.erase("stream_options");
  if (body.contains("return_token_ids")) {
    if (!body.at("return_token_ids").is_boolean())
      throw Error(Err::RequestField, "\"return_token_ids\" must be true or false")
          .with_param("return_token_ids");
    out.token_ids = body.at("return_token_ids").get<bool>();
    body.erase("return_token_ids");
  }
  Request& r = out.request;
  r.openai_line = true;
  r.endpoint = endpoint;
  r.custom_id = std::move(custom_id);
  read_request_body(body, r, "the request", true);
  if (has_stream_options && !r.stream)
    throw Error(Err::RequestField, "\"stream_options\" is only allowed with \"stream\": true")
        .with_param("stream_options");
  return out;
}

}  // namespace qmpi
