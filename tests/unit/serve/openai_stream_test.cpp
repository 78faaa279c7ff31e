// The HTTP front's pieces: SSE chunk shapes, error bodies and statuses, --http addresses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/http_body.h"
#include "serve/http_gateway.h"
#include "serve/openai_stream.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

json data_of(const std::string& event) {
  EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
  EXPECT_EQ(event.substr(event.size() - 2), "\n\n") << event;
  return json::parse(event.substr(6));
}

TEST(OpenAiStream, ChatChunks) {
  StreamShape s;
  s.endpoint = Endpoint::Chat;
  s.id = "chatcmpl-3";
  s.created = 17;
  s.model = "m";
  json j = data_of(sse_role_chunk(s, 0));
  EXPECT_EQ(j["object"], "chat.completion.chunk");
  EXPECT_EQ(j["choices"][0]["delta"]["role"], "assistant");
  ServeEvent d;
  d.text = "hi";
  d.token_ids = {5};
  j = data_of(sse_delta_chunk(s, d));
  EXPECT_EQ(j["choices"][0]["delta"], json({{"content", "hi"}}));
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(j["choices"][0].contains("token_ids"));
  d.text.clear();
  EXPECT_EQ(sse_delta_chunk(s, d), "") << "nothing to show without token ids";
  s.token_ids = true;
  j = data_of(sse_delta_chunk(s, d));
  EXPECT_EQ(j["choices"][0]["token_ids"], json({5}));
  j = data_of(sse_finish_chunk(s, 1, "length"));
  EXPECT_EQ(j["choices"][0]["index"], 1);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  RequestOutput out;
  out.prompt_tokens = 3;
  out.choices.resize(2);
  out.choices[0].tokens = {1, 2};
  out.choices[1].tokens = {3};
  j = data_of(sse_usage_chunk(s, out));
  EXPECT_TRUE(j["choices"].empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 6);
}

TEST(OpenAiStream, CompletionChunks) {
  StreamShape s;
  s.endpoint = Endpoint::Completion;
  ServeEvent d;
  d.text = "x";
  const json j = data_of(sse_delta_chunk(s, d));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "x");
}

TEST(OpenAiStream, ErrorsCarryTheCatalogueCodeAndStatus) {
  const json j = json::parse(http_error_body(Error(Err::PromptTooLong, "too long", "shorten")));
  EXPECT_EQ(j["error"]["code"], "context_length_exceeded");  // OpenAI's name
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(j["error"]["qmpi_code"], "QM502");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["message"], "too long (shorten) [QM502]");
  EXPECT_EQ(http_status(Err::PromptTooLong), 400);
  EXPECT_EQ(http_status(Err::ChatTemplateFailed), 400);  // raise_exception: retrying cannot help
  EXPECT_EQ(http_status(Err::Unauthorized), 401);
  EXPECT_EQ(http_status(Err::BodyTooLarge), 413);
  EXPECT_EQ(http_status(Err::Busy), 503);
  EXPECT_EQ(http_status(Err::CommTimeout), 500);
  EXPECT_EQ(json::parse(http_error_body(Error(Err::CommTimeout, "x")))["error"]["type"],
            "server_error");
}

TEST(OpenAiStream, ErrorsUseOpenAiCodeNamesAndNameTheParam) {
  const auto error_of = [](const Error& e) { return json::parse(http_error_body(e))["error"]; };
  EXPECT_EQ(error_of(Error(Err::Unauthorized, "no key"))["code"], "invalid_api_key");
  EXPECT_EQ(error_of(Error(Err::ModelNotFound, "gpt-4o"))["code"], "model_not_found");
  EXPECT_EQ(error_of(Error(Err::FieldUnsupported, "logit_bias"))["code"], "unsupported_parameter");
  // OpenAI has none: the catalogue's name in OpenAI's snake_case.
  EXPECT_EQ(error_of(Error(Err::RequestField, "x"))["code"], "request_field");
  EXPECT_EQ(error_of(Error(Err::SamplingInvalid, "x"))["code"], "sampling_invalid");
  EXPECT_EQ(error_of(Error(Err::RouteNotFound, "x"))["code"], "route_not_found");
  EXPECT_EQ(http_status(Err::RouteNotFound), 404);
  // A request's bad field, as the parser raises it: param names it, the value shows as sent.
  try {
    parse_http_body(R"({"model": "m", "prompt": "hi", "max_tokens": 0})", Endpoint::Completion,
                    "cmpl-1");
    FAIL() << "max_tokens 0 accepted";
  } catch (const Error& e) {
    const json j = error_of(e);
    EXPECT_EQ(j["param"], "max_tokens");
    EXPECT_NE(j["message"].get<std::string>().find("got 0"), std::string::npos) << j.dump();
    EXPECT_EQ(j["message"].get<std::string>().find("0.0"), std::string::npos) << j.dump();
  }
}

TEST(HttpGateway, ListenAddresses) {
  EXPECT_EQ(parse_listen_address("0.0.0.0:8000"), std::make_pair(std::string("0.0.0.0"), 8000));
  EXPECT_EQ(parse_listen_address("8080"), std::make_pair(std::string("0.0.0.0"), 8080));
  EXPECT_EQ(parse_listen_address("[::1]:0"), std::make_pair(std::string("::1"), 0));
  for (const char* bad : {"", "host:", "host:http", "1.2.3.4:70000", ":80", "[::1]80"}) {
    try {
      parse_listen_address(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::Usage) << bad;
    }
  }
}

}  // namespace
}  // namespace qmpi
