// A chat answer with reasoning and tool calls, streamed and whole: the stream's deltas carry
// reasoning_content, content and tool_calls as OpenAI streams them (one tool_calls entry per
// call, with its index, id, name and arguments), the finish reason is "tool_calls", and what the
// stream adds up to equals the whole response body; logprobs ride on the deltas in each
// endpoint's shape; a request for another model is a 404 model_not_found.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include <nlohmann/json.hpp>

#include "../text/text_test_util.h"
#include "requests/response_json.h"
#include "requests/served_model.h"
#include "serve/sse_writer.h"

namespace qmpi {
namespace {

using json = nlohmann::json;

const Tokenizer& bytes_tokenizer() {
  static const Tokenizer t = test::from(test::tiny_tokenizer({}));
  return t;
}

std::vector<json> chunks_of(const std::string& text) {
  std::vector<json> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    const std::string data = text.substr(at + 6, end - at - 6);
    if (data != "[DONE]") out.push_back(json::parse(data));
    at = end + 2;
  }
  return out;
}

const std::string kAnswer =
    "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

OutputFormat tools_and_reasoning() {
  OutputFormat f;
  f.tools = true;
  f.reasoning = true;
  return f;
}

RequestOutput answer(const OutputFormat& f) {
  RequestOutput out;
  out.key = 9;
  out.endpoint = Endpoint::Chat;
  out.model = "m";
  out.format = f;
  ChoiceOutput c;
  c.text = kAnswer;
  for (char ch : kAnswer) c.tokens.push_back(int32_t(uint8_t(ch)));
  c.logprobs.assign(c.tokens.size(), -0.5f);
  c.finish_reason = "stop";
  out.choices.push_back(c);
  return out;
}

TEST(ChatAnswer, WholeBodyHasReasoningToolCallsAndFinishReason) {
  const json body =
      json::parse(response_body(answer(tools_and_reasoning()), bytes_tokenizer(), false));
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& msg = choice["message"];
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(msg["reasoning_content"], "The user wants weather.");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["id"], "call_9_0_0");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\"}");

  // Without tools or a reasoning parser the message is the text, as before.
  const json plain = json::parse(response_body(answer({}), bytes_tokenizer(), false));
  EXPECT_EQ(plain["choices"][0]["message"]["content"], kAnswer);
  EXPECT_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop");
}

TEST(ChatAnswer, StreamAddsUpToTheWholeBody) {
  StreamShape shape;
  shape.endpoint = Endpoint::Chat;
  shape.id = "chatcmpl-9";
  shape.number = 9;
  shape.format = tools_and_reasoning();
  SseWriter w(shape, 1, false);
  std::string out;
  ServeEvent accepted;
  accepted.kind = ServeEvent::Kind::Accepted;
  w.write(accepted, out);
  for (char ch : kAnswer) {  // one byte per delta: the worst case for held-back tags
    ServeEvent d;
    d.text = std::string(1, ch);
    d.token_ids = {int32_t(uint8_t(ch))};
    w.write(d, out);
  }
  ServeEvent fin;
  fin.kind = ServeEvent::Kind::Final;
  fin.result = std::make_shared<RequestOutput>(answer(shape.format));
  w.write(fin, out);
  ASSERT_TRUE(w.done());

  std::string reasoning, content;
  json calls = json::array();
  std::string finish;
  for (const json& c : chunks_of(out)) {
    const json& ch = c["choices"][0];
    const json& delta = ch["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"];
    if (delta.contains("content")) content += delta["content"];
    if (delta.contains("tool_calls"))
      for (const json& tc : delta["tool_calls"]) calls.push_back(tc);
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(reasoning, "The user wants weather.");
  EXPECT_EQ(content, "") << "no markup leaks into content";
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["id"], "call_9_0_0");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ChatAnswer, StreamedLogprobsInEachEndpointsShape) {
  StreamShape shape;
  shape.endpoint = Endpoint::Chat;
  shape.logprobs = true;
  shape.tokenizer = &bytes_tokenizer();
  ServeEvent d;
  d.text = "a";
  d.token_ids = {'a'};
  d.logprobs = {-0.25f};
  d.top_logprobs = {{{'a', -0.25f}, {'b', -2.0f}}};
  json c = chunks_of(sse_chat_chunk(shape, 0, {"", "a", {}}, 0, &d))[0]["choices"][0];
  ASSERT_EQ(c["logprobs"]["content"].size(), 1u);
  EXPECT_EQ(c["logprobs"]["content"][0]["token"], "a");
  EXPECT_EQ(c["logprobs"]["content"][0]["logprob"], -0.25);
  EXPECT_EQ(c["logprobs"]["content"][0]["bytes"], json::array({97}));
  EXPECT_EQ(c["logprobs"]["content"][0]["top_logprobs"][1]["token"], "b");
  // A token whose text is held back (a possible stop string) still brings its logprobs.
  EXPECT_NE(sse_chat_chunk(shape, 0, {}, 0, &d), "");

  shape.endpoint = Endpoint::Completion;
  c = chunks_of(sse_delta_chunk(shape, d, 5))[0]["choices"][0];
  EXPECT_EQ(c["logprobs"]["tokens"], json::array({"a"}));
  EXPECT_EQ(c["logprobs"]["token_logprobs"], json::array({-0.25}));
  EXPECT_EQ(c["logprobs"]["top_logprobs"][0]["b"], -2.0);
  EXPECT_EQ(c["logprobs"]["text_offset"], json::array({5}));
}

TEST(ChatAnswer, OtherModelsAreNotFound) {
  const std::vector<std::string> names = {"qwen-tiny", "/models/qwen-tiny"};
  check_served_model("", names);
  check_served_model("qwen-tiny", names);
  check_served_model("/models/qwen-tiny", names);
  check_served_model("anything", {});
  try {
    check_served_model("gpt-4o", names);
    FAIL() << "gpt-4o was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::ModelNotFound);
    EXPECT_THAT(e.message(), ::testing::HasSubstr("gpt-4o"));
    const json body = json::parse(http_error_body(e));
    EXPECT_EQ(body["error"]["code"], "model_not_found");
    EXPECT_EQ(http_status(e.code()), 404);
  }
  EXPECT_EQ(percent_decode("Qwen%2FQwen3-0.6B%"), "Qwen/Qwen3-0.6B%");
}

}  // namespace
}  // namespace qmpi
