// Qwen's tool calls in generated text -> OpenAI tool_calls. Qwen2.5/Qwen3 answer a call as
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// (several blocks for parallel calls), after optional plain content. The parser is fed text as
// it is generated and hands back what can be shown now: content that cannot be the start of a
// <tool_call> tag, and each call once its closing tag arrives, so streaming and whole responses
// share one code path. A block that does not hold {"name": string, "arguments": object|string}
// stays content, as the model wrote it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace qmpi {

struct ToolCall {
  std::string id;  // id_prefix + its index in the response: "call_7_0"
  std::string name;
  std::string arguments;  // a JSON object as a string, as OpenAI sends it
};

struct ToolCallDelta {
  std::string content;          // text to append to the message content
  std::vector<ToolCall> calls;  // calls completed by this piece of text
};

class ToolCallParser {
 public:
  explicit ToolCallParser(std::string id_prefix = "call_") : id_prefix_(std::move(id_prefix)) {}

  ToolCallDelta feed(std::string_view text);
  // End of generation: whatever is held back (a partial or unclosed tag) is content.
  ToolCallDelta finish();

  size_t calls_so_far() const { return next_index_; }

 private:
  void drain(ToolCallDelta& out, bool at_end);

  std::string id_prefix_;
  std::string pending_;   // text not handed out yet
  bool in_call_ = false;  // pending_ starts inside a <tool_call> block
  size_t next_index_ = 0;
};

// The whole output at once: content (whitespace between and after calls dropped) and calls.
struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedToolCalls parse_tool_calls(std::string_view text, const std::string& id_prefix = "call_");

}  // namespace qmpi
