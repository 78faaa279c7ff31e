// Parsing batch input lines: both formats, and every kind of bad line with its catalogue code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "requests/request_parser.h"
#include "requests/sampling_resolver.h"

namespace qmpi {
namespace {

using ::testing::HasSubstr;

Request ok(const std::string& line) {
  const ParsedLine p = parse_request_line(line, 1);
  EXPECT_FALSE(p.error) << line << " -> " << (p.error ? p.error->message() : "");
  return p.request.value_or(Request{});
}

void bad(const std::string& line, Err code, const std::string& needle,
         const std::string& id = "qmpi-line-7") {
  const ParsedLine p = parse_request_line(line, 7);
  ASSERT_TRUE(p.error) << "accepted: " << line;
  EXPECT_EQ(p.error->code(), code) << line << " -> " << p.error->message();
  EXPECT_THAT(p.error->message(), HasSubstr(needle)) << line;
  EXPECT_THAT(p.error->message(), HasSubstr("line 7")) << "the message names the line";
  EXPECT_EQ(p.custom_id, id) << line;
}

TEST(Request, OpenAiChatLine) {
  const Request r = ok(
      R"({"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": {"model":
      "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content":
      [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}], "max_completion_tokens":
      9, "temperature": 0.5, "logprobs": true, "top_logprobs": 3, "stop": "END", "n": 2,
      "seed": 4, "stream": false, "user": "u"}})");
  EXPECT_EQ(r.custom_id, "r1");
  EXPECT_EQ(r.endpoint, Endpoint::Chat);
  EXPECT_TRUE(r.openai_line);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "hi \nthere") << "text parts join with newlines, as in vLLM";
  EXPECT_EQ(r.sampling.max_tokens, 9);
  EXPECT_FLOAT_EQ(*r.sampling.get(&SamplingParams::temperature), 0.5f);
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 3);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(r.sampling.n, 2);
  EXPECT_EQ(r.sampling.get(&SamplingParams::seed), 4u);
}

TEST(Request, OpenAiCompletionAndPlainForms) {
  Request r = ok(R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": "x",
                       "logprobs": 2, "max_tokens": 5, "stop": ["a", "b"]}})");
  EXPECT_EQ(r.endpoint, Endpoint::Completion);
  EXPECT_EQ(r.prompt, "x");
  EXPECT_TRUE(r.sampling.logprobs);
  EXPECT_EQ(r.sampling.top_logprobs, 2);
  r = ok(R"({"id": 12, "prompt": [1, 2, 3], "top_k": 5, "min_p": 0.1, "ignore_eos": true,
          "stop_token_ids": [7], "repetition_penalty": 1.1, "frequency_penalty": -1})");
  EXPECT_EQ(r.custom_id, "12");
  EXPECT_FALSE(r.openai_line);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.sampling.get(&SamplingParams::top_k), 5);
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_EQ(r.sampling.stop_token_ids, (std::vector<int32_t>{7}));
  r = ok(R"({"id": "p", "messages": [{"role": "user", "content": "q"}], "max_tokens": 3.0})");
  EXPECT_EQ(r.endpoint, Endpoint::Chat);
  EXPECT_EQ(r.sampling.max_tokens, 3);
}

TEST(Request, AListOfPrompts) {
  // A list of one, as LangChain's OpenAI class sends every prompt, is that prompt.
  EXPECT_EQ(ok(R"({"id": "a", "prompt": ["Once"]})").prompt, "Once");
  EXPECT_EQ(ok(R"({"id": "b", "prompt": [[5, 6]]})").prompt_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(ok(R"({"id": "b", "prompt": [[5, 6]]})").more_prompts.empty());
  // Several: the first is the prompt, the others follow, texts and ids mixed; n per prompt.
  const Request r = ok(R"({"id": "c", "prompt": ["one", [7, 8], "three"], "n": 2})");
  EXPECT_EQ(r.prompt, "one");
  ASSERT_EQ(r.more_prompts.size(), 2u);
  EXPECT_EQ(r.more_prompts[0].ids, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(r.more_prompts[1].text, "three");
  EXPECT_EQ(r.choice_count(), 6);
  bad(R"({"id": "d", "prompt": [["x"]]})", Err::RequestField, "prompt", "d");
  bad(R"({"id": "e", "prompt": ["a", ""]})", Err::RequestField, "\"prompt\" is empty", "e");
  std::string many = R"({"id": "f", "prompt": [)";
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + "\"p\"";
  bad(many + "]}", Err::RequestField, "at most 64", "f");
}

TEST(Request, InvalidJsonAndNonObjects) {
  bad("{\"id\": \"x\", ", Err::RequestJson, "not valid JSON");
  bad("not json at all", Err::RequestJson, "not valid JSON");
  bad("[1, 2]", Err::RequestJson, "not a JSON object");
}

TEST(Request, UnknownFieldsAreIgnoredUnlessTheyWouldChangeTheAnswer) {
  // SDK and vLLM fields qmpi has no use for, and names it has never heard of: ignored.
  Request r = ok(R"({"custom_id": "u", "url": "/v1/chat/completions", "body": {"messages":
      [{"role": "user", "content": "x"}], "store": false, "metadata": {"a": "b"}, "user": "me",
      "service_tier": "auto", "parallel_tool_calls": true, "x_trace": 7, "response_format":
      {"type": "text"}, "logit_bias": {}, "echo": false}})");
  EXPECT_EQ(r.messages.size(), 1u);
  ok(R"({"id": "u", "prompt": "x", "bogus": 1, "stream_options": null})");
  // The envelope of an OpenAI batch line stays strict.
  bad(R"({"custom_id": "u", "url": "/v1/completions", "extra": 1, "body": {"prompt": "x"}})",
      Err::RequestField, "\"extra\"", "u");
  // A typo of a field qmpi reads would sample with the default: refused, with the guess.
  bad(R"({"id": "u", "prompt": "x", "temprature": 1})", Err::RequestField,
      "did you mean \"temperature\"", "u");
  bad(R"({"id": "u", "prompt": "x", "max_token": 1})", Err::RequestField, "\"max_tokens\"", "u");
  bad(R"({"id": "u", "prompt": "x", "top_logprobs": 2})", Err::RequestField,
      "not a field of completion requests", "u");
  // Asking for what qmpi does not do.
  bad(R"({"custom_id": "u", "url": "/v1/completions", "body": {"prompt": "x", "echo": true}})",
      Err::FieldUnsupported, "\"echo\"", "u");
  bad(R"({"id": "u", "prompt": "x", "logit_bias": {"5": 10}})", Err::FieldUnsupported, "logit_bias",
      "u");
  // Message fields beyond role and content go to the template as sent.
  r = ok(R"({"id": "u", "messages": [{"role": "user", "content": "x", "mood": 1}]})");
  EXPECT_EQ(r.chat.extras.messages[0]["mood"], 1);
}

TEST(Request, ToolsToolChoiceAndTemplateKwargs) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "d", "parameters": {"type": "object", "properties": {"city": {"type":
      "string"}}}}}])";
  const std::string msgs = R"("messages": [{"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "reasoning_content": "think", "tool_calls": [{"id":
      "c1", "type": "function", "function": {"name": "get_weather", "arguments":
      "{\"city\": \"Oslo\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])";
  Request r = ok("{\"id\": \"t\", " + msgs + ", " + tools +
                 R"(, "chat_template_kwargs": {"enable_thinking": false}})");
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::Auto) << "tools given: auto";
  ASSERT_TRUE(r.chat.extras.tools.is_array());
  EXPECT_EQ(r.chat.extras.tools[0]["function"]["name"], "get_weather");
  // Tool schemas keep their keys in the order sent: templates print them with tojson.
  EXPECT_EQ(r.chat.extras.tools[0]["function"].begin().key(), "name");
  EXPECT_EQ(r.chat.extras.tools[0]["function"]["parameters"].begin().key(), "type");
  EXPECT_EQ(r.chat.extras.kwargs["enable_thinking"], false);
  ASSERT_EQ(r.chat.extras.messages.size(), 3u);
  EXPECT_EQ(r.chat.extras.messages[1]["reasoning_content"], "think");
  EXPECT_EQ(r.chat.extras.messages[2]["tool_call_id"], "c1");
  EXPECT_EQ(r.messages[1].content, "") << "null content reads as empty";
  EXPECT_TRUE(r.chat.add_generation_prompt);

  r = ok("{\"id\": \"t\", " + msgs + ", " + tools + R"(, "tool_choice": "none"})");
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::None);
  r = ok("{\"id\": \"t\", " + msgs + ", " + tools + R"(, "tool_choice": "required"})");
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::Required);
  r = ok("{\"id\": \"t\", " + msgs + ", " + tools +
         R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
         "parallel_tool_calls": false, "add_generation_prompt": false})");
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::Named);
  EXPECT_EQ(r.chat.tool_name, "get_weather");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_FALSE(r.chat.add_generation_prompt);
  r = ok("{\"id\": \"t\", " + msgs + "}");
  EXPECT_EQ(r.chat.tool_choice, ToolChoice::None) << "no tools: nothing to call";

  bad("{\"id\": \"t\", " + msgs + R"(, "tool_choice": "required"})", Err::RequestField,
      "needs \"tools\"", "t");
  bad("{\"id\": \"t\", " + msgs + ", " + tools +
          R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
      Err::RequestField, "not in \"tools\"", "t");
  bad("{\"id\": \"t\", " + msgs + ", " + tools + R"(, "tool_choice": "sometimes"})",
      Err::RequestField, "tool_choice", "t");
  bad("{\"id\": \"t\", " + msgs + R"(, "tools": [{"type": "function"}]})", Err::RequestField,
      "tools[0]", "t");
  bad("{\"id\": \"t\", " + msgs + R"(, "tools": [{"type": "function", "function": {}}]})",
      Err::RequestField, "tools[0].function.name", "t");
  bad("{\"id\": \"t\", " + msgs + R"(, "chat_template_kwargs": [1]})", Err::RequestField,
      "chat_template_kwargs", "t");
  bad(R"({"id": "t", "messages": [{"content": "x"}]})", Err::RequestField, "role", "t");
  for (const char* reserved :
       {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token"})
    bad("{\"id\": \"t\", " + msgs + R"(, "chat_template_kwargs": {")" + reserved + "\": 1}}",
        Err::RequestField, "may not set \"" + std::string(reserved) + "\"", "t");
  bad(R"({"id": "t", "messages": [{"role": "function", "content": "x"}]})", Err::RequestField,
      "is not a chat role", "t");
  EXPECT_EQ(
      ok(R"({"id": "t", "messages": [{"role": "developer", "content": "x"}]})").messages.at(0).role,
      "system");
  bad(R"({"id": "t", "prompt": "x", "tools": []})", Err::RequestField,
      "not a field of completion requests", "t");
}

TEST(Request, WrongTypes) {
  bad(R"({"id": "t", "prompt": "x", "max_tokens": "16"})", Err::RequestField,
      "\"max_tokens\" must be an integer", "t");
  bad(R"({"id": "t", "prompt": "x", "max_tokens": 2.5})", Err::RequestField, "integer", "t");
  bad(R"({"id": "t", "prompt": "x", "temperature": "hot"})", Err::RequestField, "a number", "t");
  bad(R"({"id": "t", "prompt": 5})", Err::RequestField, "\"prompt\" must be", "t");
  bad(R"({"id": "t", "prompt": ["a", 5]})", Err::RequestField, "\"prompt\" must be", "t");
  bad(R"({"id": "t", "messages": "hi"})", Err::RequestField, "\"messages\" must be", "t");
  bad(R"({"id": "t", "messages": [{"role": "user", "content": 3}]})", Err::RequestField, "content",
      "t");
  bad(R"({"id": "t", "prompt": "x", "stop": [1]})", Err::RequestField, "\"stop\"", "t");
  bad(R"({"id": "t", "prompt": "x", "ignore_eos": 1})", Err::RequestField, "true or false", "t");
  bad(R"({"id": "t", "prompt": "x", "stream": true})", Err::RequestField, "stream", "t");
  bad(R"({"id": {"a": 1}, "prompt": "x"})", Err::RequestField, "\"id\" must be");
  bad(R"({"custom_id": 5, "url": "/v1/completions", "body": {"prompt": "x"}})", Err::RequestField,
      "\"custom_id\" must be a string", "5");
}

TEST(Request, MissingPartsAndWrongEndpoints) {
  bad(R"({"prompt": "x"})", Err::RequestField, "no \"id\"");
  bad(R"({"id": "m"})", Err::RequestField, "no \"messages\" or \"prompt\"", "m");
  bad(R"({"id": "m", "prompt": "x", "messages": []})", Err::RequestField, "not both", "m");
  bad(R"({"custom_id": "m", "url": "/v1/embeddings", "body": {"prompt": "x"}})", Err::RequestField,
      "\"url\"", "m");
  bad(R"({"custom_id": "m", "method": "GET", "url": "/v1/completions", "body": {"prompt": "x"}})",
      Err::RequestField, "\"method\"", "m");
  bad(R"({"custom_id": "m", "url": "/v1/chat/completions", "body": {"prompt": "x"}})",
      Err::RequestField, "needs \"messages\"", "m");
  bad(R"({"custom_id": "m", "url": "/v1/completions"})", Err::RequestField, "\"body\"", "m");
  bad(R"({"id": "m", "prompt": ""})", Err::RequestField, "empty", "m");
}

TEST(Request, BadSamplingValues) {
  const auto s = [](const std::string& fields) {
    return R"({"id": "s", "prompt": "x", )" + fields + "}";
  };
  bad(s(R"("temperature": -0.1)"), Err::SamplingInvalid, "temperature", "s");
  bad(s(R"("top_p": 0)"), Err::SamplingInvalid, "top_p", "s");
  bad(s(R"("top_p": 1.5)"), Err::SamplingInvalid, "top_p", "s");
  bad(s(R"("top_k": 0)"), Err::SamplingInvalid, "top_k", "s");
  bad(s(R"("top_k": -2)"), Err::SamplingInvalid, "top_k", "s");
  bad(s(R"("min_p": 1.5)"), Err::SamplingInvalid, "min_p", "s");
  bad(s(R"("repetition_penalty": 0)"), Err::SamplingInvalid, "repetition_penalty", "s");
  bad(s(R"("presence_penalty": 2.5)"), Err::SamplingInvalid, "presence_penalty", "s");
  bad(s(R"("max_tokens": 0)"), Err::SamplingInvalid, "max_tokens", "s");
  bad(s(R"("n": 0)"), Err::SamplingInvalid, "\"n\"", "s");
  bad(s(R"("logprobs": 21)"), Err::SamplingInvalid, "logprobs", "s");
  bad(s(R"("stop": ["ok", ""])"), Err::SamplingInvalid, "must not be empty", "s");
  bad(s("\"stop\": \"" + std::string(1025, 'a') + "\""), Err::SamplingInvalid, "at most 1024", "s");
  bad(s(R"("stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
      Err::SamplingInvalid, "at most 16", "s");
  bad(R"({"id": "s", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
      Err::SamplingInvalid, "needs \"logprobs\": true", "s");
}

// Issue 19, item 7: a value out of range is shown as the request wrote it ("got -1", not
// "got -1.0"; "got 1e+300", not the float it overflowed to).
// Found by the fuzz tests: a content part whose "type" is not a string threw the JSON
// library's type_error (an internal error that ended the batch job).
TEST(Request, ContentPartsOfAnyShape) {
  for (const char* part : {R"({"type": 16.0, "text": "a"})", R"({"type": null})",
                           R"({"type": ["text"], "text": "a"})", R"({"text": "a"})", "7"}) {
    const std::string line =
        std::string(R"({"id": "c", "messages": [{"role": "user", "content": [)") + part + "]}]}";
    bad(line, Err::RequestField, "must be {\"type\": \"text\"", "c");
  }
}

TEST(Request, OutOfRangeValuesAreShownAsWritten) {
  const auto msg = [](const std::string& field) {
    const ParsedLine p = parse_request_line(R"({"id": "s", "prompt": "x", )" + field + "}", 1);
    return p.error ? p.error->message() : std::string("accepted");
  };
  EXPECT_THAT(msg(R"("max_tokens": -1)"), ::testing::EndsWith("got -1"));
  EXPECT_THAT(msg(R"("n": 1000)"), ::testing::EndsWith("got 1000"));
  EXPECT_THAT(msg(R"("top_k": -5)"), ::testing::EndsWith("got -5"));
  EXPECT_THAT(msg(R"("temperature": 1e300)"), ::testing::EndsWith("got 1e+300"));
  EXPECT_THAT(msg(R"("top_p": 0)"), ::testing::EndsWith("got 0"));
}

TEST(Request, SamplingDefaultsComeFromTheGenerationConfig) {
  GenerationConfig gen;
  gen.do_sample = true;
  gen.temperature = 0.7;
  gen.top_p = 0.8;
  gen.top_k = 20;
  gen.repetition_penalty = 1.05;
  Request r = ok(R"({"id": "a", "prompt": "x"})");
  SamplingParams p = resolve_sampling(r.sampling, gen, r.custom_id);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(p.top_p, 0.8f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.05f);
  EXPECT_EQ(p.top_logprobs, 0);
  // No seed: one derived from the id, the same every time, different for another id.
  const uint64_t seed_a = p.seed;
  EXPECT_EQ(resolve_sampling(r.sampling, gen, r.custom_id).seed, seed_a);
  r.custom_id = "b";
  EXPECT_NE(resolve_sampling(r.sampling, gen, r.custom_id).seed, seed_a);
  r = ok(R"({"id": "a", "prompt": "x", "temperature": 0, "top_k": -1, "seed": 3, "logprobs": 4})");
  p = resolve_sampling(r.sampling, gen, r.custom_id);
  EXPECT_TRUE(p.greedy());
  EXPECT_EQ(p.top_k, -1);
  EXPECT_EQ(p.seed, 3u);
  EXPECT_EQ(p.top_logprobs, 4);
  gen.do_sample = false;  // greedy unless the request says otherwise
  EXPECT_TRUE(resolve_sampling(ok(R"({"id": "a", "prompt": "x"})").sampling, gen, "a").greedy());
}

}  // namespace
}  // namespace qmpi
