// A chat answer's generated text -> the parts of an OpenAI assistant message: reasoning_content
// (Qwen3's <think>...</think>, when the output format asks for it), content, and tool_calls
// (Qwen's <tool_call>{json}</tool_call> blocks, through text/tool_call_parser.h). It is fed
// text as it is generated and hands back what can be shown now, so a stream and a whole
// response are cut the same way: feeding the text in any pieces gives what shape_message gives.
// Newlines around the reasoning are dropped, as Qwen's chat template drops them when it
// renders reasoning_content back into a prompt.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "requests/output_format.h"
#include "text/tool_call_parser.h"

namespace qmpi {

struct MessageDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class MessageShaper {
 public:
  // Tool call ids are `call_id_prefix` + their index in the answer.
  MessageShaper(const OutputFormat& format, std::string call_id_prefix);

  MessageDelta feed(std::string_view text);
  MessageDelta finish();  // the end of the answer: what was held back
  size_t calls() const { return calls_; }

 private:
  enum class Stage { Start, Reasoning, AfterReasoning, Content };
  void step(bool at_end, MessageDelta& out);
  void content(std::string_view text, bool at_end, MessageDelta& out);
  void keep_calls(std::vector<ToolCall>& from, MessageDelta& out);

  OutputFormat format_;
  Stage stage_ = Stage::Content;
  std::string held_;              // text of the reasoning stages not handed out yet
  bool reasoning_begun_ = false;  // a character other than a newline was reasoning
  std::optional<ToolCallParser> tools_;
  size_t calls_ = 0;
  MessageDelta carry_;  // what the prefill gave, handed out with the first feed
};

// The whole answer at once. `content` is null (nullopt) when the answer is only tool calls or
// only reasoning; `reasoning` is set when the format parses reasoning and the answer had some.
struct ShapedMessage {
  std::optional<std::string> reasoning;
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};
ShapedMessage shape_message(const OutputFormat& format, std::string_view text,
                            const std::string& call_id_prefix);

// "call_<response>_<choice>_": ids unique within a response, and the same on a rerun.
std::string call_id_prefix(int64_t response_no, size_t choice);

// "tool_calls" for an answer that stopped after making calls, else `reason`.
std::string message_finish_reason(const std::string& reason, size_t calls);

}  // namespace qmpi
