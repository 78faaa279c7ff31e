// Qwen's <tool_call> blocks -> OpenAI tool calls, whole and fed piece by piece.
#include "text/tool_call_parser.h"

#include <gtest/gtest.h>

namespace qmpi {
namespace {

const std::string kTwoCalls =
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Zürich\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", "
    "\"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>";

TEST(ToolCallParser, WholeOutputGivesContentAndCalls) {
  const ParsedToolCalls p = parse_tool_calls(kTwoCalls, "call_9_");
  EXPECT_EQ(p.content, "Let me check.\n");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].id, "call_9_0");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Zürich\", \"unit\": \"c\"}");  // model's key order
  EXPECT_EQ(p.calls[1].id, "call_9_1");
  EXPECT_EQ(p.calls[1].arguments, "{\"q\": 1}");  // string arguments pass through
}

TEST(ToolCallParser, PlainTextAndLookAlikesStayContent) {
  EXPECT_EQ(parse_tool_calls("no calls < here <tool").content, "no calls < here <tool");
  const ParsedToolCalls bad = parse_tool_calls("a<tool_call>{not json}</tool_call>b");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "a<tool_call>{not json}</tool_call>b");
  const ParsedToolCalls unclosed = parse_tool_calls("x<tool_call>{\"name\": \"f\"");
  EXPECT_TRUE(unclosed.calls.empty());
  EXPECT_EQ(unclosed.content, "x<tool_call>{\"name\": \"f\"");
  const ParsedToolCalls noargs = parse_tool_calls("<tool_call>{\"name\": \"f\"}</tool_call>");
  ASSERT_EQ(noargs.calls.size(), 1u);
  EXPECT_EQ(noargs.calls[0].arguments, "{}");
  EXPECT_TRUE(parse_tool_calls("<tool_call>{\"name\": 3}</tool_call>").calls.empty());
}

TEST(ToolCallParser, ByteByByteFeedingGivesTheSameResultAndNeverLeaksATag) {
  ToolCallParser p("call_9_");
  std::string content;
  std::vector<ToolCall> calls;
  for (char c : kTwoCalls) {
    ToolCallDelta d = p.feed(std::string_view(&c, 1));
    content += d.content;
    EXPECT_EQ(content.find("<tool"), std::string::npos) << "a partial tag was shown as content";
    for (ToolCall& call : d.calls) calls.push_back(std::move(call));
  }
  ToolCallDelta end = p.finish();
  content += end.content;
  EXPECT_EQ(content, "Let me check.\n");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].name, "search");
  EXPECT_EQ(p.calls_so_far(), 2u);
}

TEST(ToolCallParser, ContentIsReleasedAsSoonAsItCannotBeATag) {
  ToolCallParser p;
  EXPECT_EQ(p.feed("Hello <").content, "Hello ");
  EXPECT_EQ(p.feed("b>").content, "<b>");
  EXPECT_EQ(p.feed(" <tool_ca").content, " ");
  EXPECT_EQ(p.finish().content, "<tool_ca");
}

}  // namespace
}  // namespace qmpi
