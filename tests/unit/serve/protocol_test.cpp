// The ZeroMQ protocol's parser refuses every malformed message with its catalogue code (and
// keeps the id when it could read one), and the replies have the documented shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/protocol.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

Err code_of(const std::string& text, std::string* id_out = nullptr) {
  std::string id;
  try {
    parse_client_message(text, id);
  } catch (const Error& e) {
    if (id_out) *id_out = id;
    return e.code();
  }
  ADD_FAILURE() << "accepted: " << text;
  return Err::Internal;
}

TEST(Protocol, ReadsGenerateMessages) {
  std::string id;
  ClientMessage m = parse_client_message(
      R"({"v": 1, "type": "generate", "id": "a1", "prompt": "hi", "max_tokens": 5,
          "temperature": 0, "stream": true})",
      id);
  EXPECT_EQ(m.type, MessageType::Generate);
  EXPECT_EQ(id, "\"a1\"");
  EXPECT_EQ(m.id, "\"a1\"");
  EXPECT_EQ(m.request.custom_id, "a1");
  EXPECT_EQ(m.request.endpoint, Endpoint::Completion);
  EXPECT_EQ(m.request.prompt, "hi");
  EXPECT_EQ(*m.request.sampling.max_tokens, 5);
  EXPECT_TRUE(m.request.stream);

  m = parse_client_message(R"({"id": 7, "messages": [{"role": "user", "content": "x"}]})", id);
  EXPECT_EQ(m.type, MessageType::Generate);  // "type" and "v" may be left out
  EXPECT_EQ(m.id, "7");
  EXPECT_EQ(m.request.custom_id, "7");
  EXPECT_EQ(m.request.endpoint, Endpoint::Chat);
  EXPECT_FALSE(m.request.stream);
}

TEST(Protocol, ReadsControlMessages) {
  std::string id;
  EXPECT_EQ(parse_client_message(R"({"type": "cancel", "id": "a1"})", id).type,
            MessageType::Cancel);
  EXPECT_EQ(parse_client_message(R"({"v": 1, "type": "health"})", id).type, MessageType::Health);
  EXPECT_EQ(parse_client_message(R"({"type": "stats", "id": 3})", id).type, MessageType::Stats);
}

TEST(Protocol, RefusesMalformedMessagesWithTheirCodes) {
  EXPECT_EQ(code_of(""), Err::RequestJson);
  EXPECT_EQ(code_of("{\"id\": \"a\", "), Err::RequestJson);
  EXPECT_EQ(code_of("[1, 2]"), Err::RequestJson);
  EXPECT_EQ(code_of("\"just a string\""), Err::RequestJson);
  EXPECT_EQ(code_of(std::string(1000, '[') + std::string(1000, ']')), Err::RequestJson);
  EXPECT_EQ(code_of(R"({"prompt": "x"})"), Err::RequestField);  // no id
  EXPECT_EQ(code_of(R"({"id": "", "prompt": "x"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"id": [1], "prompt": "x"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"id": ")" + std::string(300, 'x') + R"(", "prompt": "x"})"),
            Err::RequestField);
  EXPECT_EQ(code_of(R"({"v": 2, "id": "a", "prompt": "x"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"type": "launch", "id": "a"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"type": 5, "id": "a"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"type": "cancel"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"type": "health", "prompt": "x"})"), Err::RequestField);
  EXPECT_EQ(code_of(R"({"id": "a", "prompt": "x", "max_tokens": 0})"), Err::SamplingInvalid);
  EXPECT_EQ(code_of(R"({"id": "a", "prompt": "x", "top_p": 7})"), Err::SamplingInvalid);
  EXPECT_EQ(code_of(R"({"id": "a", "prompt": "x", "echo": true})"), Err::FieldUnsupported);
  EXPECT_EQ(code_of(R"({"id": "a", "prompt": "x", "max_token": 3})"), Err::RequestField);

  std::string id;
  EXPECT_EQ(code_of(R"({"id": "typo", "prompt": "x", "temprature": 0})", &id), Err::RequestField);
  EXPECT_EQ(id, "\"typo\"") << "the error reply can name the request";
  EXPECT_EQ(code_of(R"({"id": 9, "prompt": "x", "max_tokens": "9"})", &id), Err::RequestField);
  EXPECT_EQ(id, "9");
}

// Issue 19, item 1: a number beyond a double is the request's error, with its id (it was QM999
// without one).
TEST(Protocol, HugeNumbersAreFieldErrorsWithTheId) {
  std::string id;
  EXPECT_EQ(code_of(R"({"id": "g3", "prompt": "x", "max_tokens": 1e400})", &id), Err::RequestField);
  EXPECT_EQ(id, "\"g3\"");
  EXPECT_EQ(code_of(R"({"id": 5, "prompt": "x", "temperature": -1e400})", &id), Err::RequestField);
  EXPECT_EQ(id, "5");
  id.clear();
  EXPECT_EQ(code_of(R"({"id": 1e400, "prompt": "x"})", &id), Err::RequestField);
  EXPECT_EQ(id, "");
}

TEST(Protocol, DepthCheckIgnoresBracketsInStrings) {
  EXPECT_NO_THROW(check_json_shape(R"({"prompt": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})"));
  EXPECT_NO_THROW(check_json_shape(R"({"prompt": "\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})"));
  EXPECT_THROW(check_json_shape(std::string(40, '{'), 32), Error);
}

// Issue 28: 80k keys in "metadata" took 5 s to parse (ordered objects insert in linear time);
// the key count is refused in the one pass before the parser, whatever the nesting.
TEST(Protocol, ObjectsWithTooManyKeysAreRefusedBeforeParsing) {
  const auto object = [](size_t keys) {
    std::string s = "{";
    for (size_t i = 0; i < keys; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    return s + "}";
  };
  EXPECT_NO_THROW(check_json_shape(object(kMaxObjectKeys)));
  EXPECT_THROW(check_json_shape(object(kMaxObjectKeys + 1)), Error);
  const std::string nested = R"({"prompt": "x", "metadata": )" + object(80000) + "}";
  try {
    parse_request_json(nested, "the body");
    ADD_FAILURE() << "80000 keys were parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::RequestJson);
    EXPECT_THAT(e.message(), ::testing::HasSubstr("more than 1024 keys"));
  }
  // Keys of sibling objects count apart; colons inside strings are not keys.
  std::string siblings = "[";
  for (int i = 0; i < 4; ++i) siblings += (i ? "," : "") + object(kMaxObjectKeys);
  EXPECT_NO_THROW(check_json_shape(siblings + "]"));
  EXPECT_NO_THROW(check_json_shape(R"({"prompt": ")" + std::string(5000, ':') + "\"}"));
}

TEST(Protocol, RepliesHaveTheDocumentedShape) {
  ServeEvent d;
  d.index = 1;
  d.text = "he";
  d.token_ids = {104, 101};
  json j = json::parse(delta_message("\"a1\"", d));
  EXPECT_EQ(j, json::parse(R"({"type": "delta", "id": "a1", "index": 1, "text": "he",
                              "token_ids": [104, 101]})"));

  RequestOutput out;
  out.prompt_tokens = 4;
  ChoiceOutput c;
  c.text = "hey";
  c.tokens = {1, 2, 3};
  c.finish_reason = "length";
  out.choices.push_back(c);
  j = json::parse(final_message("7", out, true));
  EXPECT_EQ(j["type"], "final");
  EXPECT_EQ(j["id"], 7);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["text"], "hey");
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens": 4, "completion_tokens": 3,
                                        "total_tokens": 7})"));
  j = json::parse(final_message("7", out, false));
  EXPECT_FALSE(j["choices"][0].contains("text")) << "streamed requests got their text already";

  j = json::parse(error_message("", Error(Err::Busy, "full", "later")));
  EXPECT_EQ(j["type"], "error");
  EXPECT_FALSE(j.contains("id"));
  EXPECT_EQ(j["code"], "QM504");
  EXPECT_EQ(j["name"], "busy");
  EXPECT_EQ(j["message"], "full");

  EXPECT_EQ(json::parse(health_message("", Health::Loading))["status"], "loading");
  EngineSnapshot e;
  e.kv_blocks_total = 10;
  e.kv_blocks_used = 3;
  e.replicas = {{1, 2, 30, ""}, {0, 0, 12, "rank 3 stopped answering"}};
  j = json::parse(stats_message("", e, 2, MetricCounters{}, 1));
  EXPECT_EQ(j["kv_blocks_free"], 7);
  EXPECT_EQ(j["queued"], 2);
  ASSERT_EQ(j["replicas"].size(), 2u);
  EXPECT_EQ(j["replicas"][0]["running"], 2);
  EXPECT_EQ(j["replicas"][0]["state"], "up");
  EXPECT_FALSE(j["replicas"][0].contains("reason"));
  EXPECT_EQ(j["replicas"][1]["generated"], 12);
  EXPECT_EQ(j["replicas"][1]["state"], "down");
  EXPECT_EQ(j["replicas"][1]["reason"], "rank 3 stopped answering");

  e.health = Health::Ready;
  j = json::parse(health_body(e));
  EXPECT_EQ(j["status"], "ready");
  EXPECT_EQ(j["replicas"][1]["state"], "down");
  e.replicas.resize(1);  // one mesh: /health stays {"status"}
  EXPECT_FALSE(json::parse(health_body(e)).contains("replicas"));
}

}  // namespace
}  // namespace qmpi
