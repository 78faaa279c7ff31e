// Chat answers read back as OpenAI messages: Qwen3's <think> text as reasoning_content, Qwen's
// <tool_call> blocks as tool_calls, the rest as content; fed in any pieces it gives what the
// whole text gives, and it never shows a tag.
#include <gtest/gtest.h>

#include "requests/message_shaper.h"

namespace qmpi {
namespace {

OutputFormat fmt(bool tools, bool reasoning) {
  OutputFormat f;
  f.tools = tools;
  f.reasoning = reasoning;
  return f;
}

// Every split into 1-byte pieces must add up to the whole-text answer.
ShapedMessage byte_by_byte(const OutputFormat& f, const std::string& text) {
  MessageShaper s(f, "call_x_");
  MessageDelta all;
  const auto add = [&](MessageDelta d) {
    EXPECT_EQ(d.content.find("<think>"), std::string::npos) << d.content;
    EXPECT_EQ(d.content.find("</think>"), std::string::npos) << d.content;
    EXPECT_EQ(d.content.find("<tool_call>"), std::string::npos) << d.content;
    all.reasoning += d.reasoning;
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(c);
  };
  for (char ch : text) add(s.feed(std::string(1, ch)));
  add(s.finish());
  const ShapedMessage whole = shape_message(f, text, "call_x_");
  EXPECT_EQ(all.reasoning, whole.reasoning.value_or(""));
  EXPECT_EQ(all.calls.size(), whole.calls.size());
  return whole;
}

TEST(MessageShaper, ThinkingBecomesReasoningContent) {
  const OutputFormat f = fmt(false, true);
  ShapedMessage m = byte_by_byte(f, "<think>\nLet me see.\n</think>\n\nParis.");
  EXPECT_EQ(m.reasoning, "Let me see.");
  EXPECT_EQ(m.content, "Paris.");
  // Without the parser the text is content, as generated.
  m = shape_message(fmt(false, false), "<think>\nx\n</think>\n\nParis.", "c_");
  EXPECT_FALSE(m.reasoning);
  EXPECT_EQ(m.content, "<think>\nx\n</think>\n\nParis.");
  // No <think> at the start: all content; an answer cut inside its thinking: reasoning only.
  m = byte_by_byte(f, "Paris, not <think>.");
  EXPECT_FALSE(m.reasoning);
  EXPECT_EQ(m.content, "Paris, not <think>.");
  m = byte_by_byte(f, "<think>\nstill thinking\n\n");
  EXPECT_EQ(m.reasoning, "still thinking");
  EXPECT_FALSE(m.content) << "content is null when the answer was only reasoning";
  // Empty thinking (enable_thinking false writes it into the prompt, a model may repeat it).
  m = byte_by_byte(f, "<think>\n\n</think>\n\nHi");
  EXPECT_FALSE(m.reasoning);
  EXPECT_EQ(m.content, "Hi");
}

TEST(MessageShaper, PromptThatOpenedThinkingStartsInReasoning) {
  OutputFormat f = fmt(false, true);
  f.in_reasoning = true;
  const ShapedMessage m = byte_by_byte(f, "hmm\n</think>\n\nDone");
  EXPECT_EQ(m.reasoning, "hmm");
  EXPECT_EQ(m.content, "Done");
}

TEST(MessageShaper, ToolCallsAfterThinking) {
  const std::string text =
      "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>";
  ShapedMessage m = byte_by_byte(fmt(true, true), text);
  EXPECT_EQ(m.reasoning, "Need weather.");
  EXPECT_FALSE(m.content);
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[0].id, "call_x_0");
  EXPECT_EQ(m.calls[0].name, "get_weather");
  EXPECT_EQ(m.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(m.calls[1].name, "get_time");
  // parallel_tool_calls: false keeps the first.
  OutputFormat one = fmt(true, true);
  one.single_call = true;
  m = shape_message(one, text, "c_");
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].name, "get_weather");
  // Tools not asked for (tool_choice none): the block is content.
  m = shape_message(fmt(false, false), text, "c_");
  EXPECT_TRUE(m.calls.empty());
  EXPECT_EQ(m.content, text);
}

TEST(MessageShaper, ForcedCallPrefillIsPartOfTheAnswer) {
  OutputFormat f = fmt(true, true);
  ChatRequest chat;
  chat.tool_choice = ToolChoice::Named;
  chat.tool_name = "get_weather";
  f.prefill = tool_call_prefill(chat);
  EXPECT_EQ(f.prefill, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  ShapedMessage m = byte_by_byte(f, "{\"city\": \"Oslo\"}}\n</tool_call>");
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].name, "get_weather");
  EXPECT_EQ(m.calls[0].arguments, "{\"city\": \"Oslo\"}");
  chat.tool_choice = ToolChoice::Required;
  f.prefill = tool_call_prefill(chat);
  m = shape_message(f, "get_time\", \"arguments\": {}}\n</tool_call>", "c_");
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].name, "get_time");
  // A forced call the model did not finish stays text, with its prefill.
  m = shape_message(f, "get_ti", "c_");
  EXPECT_TRUE(m.calls.empty());
  EXPECT_EQ(m.content, "<tool_call>\n{\"name\": \"get_ti");
}

TEST(MessageShaper, FinishReasonSaysToolCallsOnlyWhenTheAnswerStoppedAfterCalls) {
  EXPECT_EQ(message_finish_reason("stop", 1), "tool_calls");
  EXPECT_EQ(message_finish_reason("stop", 0), "stop");
  EXPECT_EQ(message_finish_reason("length", 2), "length");
  EXPECT_EQ(call_id_prefix(7, 1), "call_7_1_");
}

}  // namespace
}  // namespace qmpi
