#include "requests/output_format.h"

#include <nlohmann/json.hpp>

namespace qmpi {

std::string tool_call_prefill(const ChatRequest& chat) {
  if (chat.tool_choice == ToolChoice::Required) return "<tool_call>\n{\"name\": \"";
  if (chat.tool_choice == ToolChoice::Named)
    return "<tool_call>\n{\"name\": " + nlohmann::json(chat.tool_name).dump() + ", \"arguments\": ";
  return {};
}

OutputFormat output_format(const Request& req, bool reasoning_parser, const Tokenizer* tok,
                           std::span<const int32_t> prompt) {
  OutputFormat f;
  if (req.endpoint != Endpoint::Chat) return f;
  f.tools = req.chat.tool_choice != ToolChoice::None;
  f.single_call = !req.chat.parallel_tool_calls;
  f.prefill = tool_call_prefill(req.chat);
  f.reasoning = reasoning_parser;
  if (f.reasoning && f.prefill.empty() && tok && !prompt.empty()) {
    // The last few ids are enough: "<think>" is one token, followed at most by newlines.
    const size_t n = std::min<size_t>(prompt.size(), 4);
    std::string tail;
    try {
      tail = tok->decode(prompt.subspan(prompt.size() - n));
    } catch (const std::exception&) {
      return f;
    }
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    f.in_reasoning = tail.ends_with("<think>");
  }
  return f;
}

}  // namespace qmpi
