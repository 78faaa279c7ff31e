// How a chat answer's text is read back into an OpenAI message: whether <tool_call> blocks
// become `tool_calls` (the request gave tools and did not say tool_choice "none"), whether
// <think>...</think> becomes `reasoning_content` (the server's --reasoning-parser qwen3), and
// what the answer was made to start with. Decided once per request, from the request, the
// server's settings and the prompt, and carried with the request's output to whatever front
// shapes it (batch lines, HTTP bodies and streams, ZeroMQ finals).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "requests/request.h"
#include "text/tokenizer.h"

namespace qmpi {

struct OutputFormat {
  bool tools = false;         // parse <tool_call> blocks into tool_calls
  bool single_call = false;   // parallel_tool_calls: false (keep the first call only)
  bool reasoning = false;     // split <think>...</think> off as reasoning_content
  bool in_reasoning = false;  // the prompt opened a <think> block the answer continues
  std::string prefill;        // text the prompt ends with that belongs to the answer
};

// tool_choice "required" or a named function: the prompt ends with the start of a call
// (`<tool_call>\n{"name": "` or `<tool_call>\n{"name": "f", "arguments": `), so the model can
// only continue it. Empty for auto and none.
std::string tool_call_prefill(const ChatRequest& chat);

// `reasoning_parser`: the server's --reasoning-parser is qwen3. `prompt` is the request's
// prompt ids (a prompt that ends inside <think>, as Qwen3 thinking-only templates write it,
// starts the answer in reasoning).
OutputFormat output_format(const Request& req, bool reasoning_parser, const Tokenizer* tok,
                           std::span<const int32_t> prompt);

}  // namespace qmpi
