// A checked request, whatever it came from (a batch line, a ZeroMQ message, an HTTP body, the
// options of `qmpi run`): the endpoint it asks for, its prompt, and its sampling fields as given
// (unset ones come from generation_config.json, see sampling_resolver.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "constrain/constraint_source.h"
#include "engine/sampling_params.h"
#include "text/chat_template.h"

namespace qmpi {

enum class Endpoint { Chat, Completion };

// Sampling fields as the request gave them: the scalar ones of the table in
// engine/sampling_params.h (get/set by member), and those parsed by hand.
struct RequestSampling : GivenSampling {
  std::optional<int64_t> max_tokens;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t n = 1;
  bool logprobs = false;     // report the sampled tokens' log-probabilities
  int32_t top_logprobs = 0;  // and this many alternatives per token
};

// OpenAI's tool_choice. Auto when tools are given and the request does not say, None without
// tools. Required and Named start the answer with a <tool_call> block (tool_call_prefill in
// output_format.h) and constrain the rest to a call whose arguments fit the tool's parameters
// (structured_output.h).
enum class ToolChoice : uint8_t { Auto, None, Required, Named };

// What a chat request carries besides role/content pairs.
struct ChatRequest {
  ChatExtras extras;  // messages as sent (tool_calls, reasoning_content...), tools, kwargs
  ToolChoice tool_choice = ToolChoice::None;
  std::string tool_name;  // ToolChoice::Named
  bool add_generation_prompt = true;
  bool parallel_tool_calls = true;  // false: only the first call of an answer is kept
};

// One prompt of a completions request: text, or token ids.
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> ids;
};

struct Request {
  std::string custom_id;
  Endpoint endpoint = Endpoint::Completion;
  bool openai_line = false;           // came as an OpenAI Batch API line
  std::string model;                  // the body's "model", echoed in the response
  std::vector<ChatMessage> messages;  // chat
  ChatRequest chat;                   // chat: the rest of the conversation
  std::string prompt;                 // completion text
  std::vector<int32_t> prompt_ids;    // completion given as token ids
  // A completions request with a list of prompts: the second and later ones. Each prompt gets
  // its own n choices, numbered after the earlier prompts' as OpenAI does (prompt * n + choice).
  std::vector<CompletionPrompt> more_prompts;
  RequestSampling sampling;
  std::optional<ConstraintSource> constraint;  // structured output (structured_output.h)
  bool stream = false;                         // "stream": true (serving only)

  // The choices of the answer: n for each prompt.
  int32_t choice_count() const { return sampling.n * int32_t(1 + more_prompts.size()); }
};

}  // namespace qmpi
