// A chat request's `messages` array, checked and brought to the shape chat templates expect:
// every message an object with a string role; content a string, OpenAI content parts
// ([{"type": "text", "text": ...}]) joined with newlines, or "" when null or missing (as vLLM
// hands it to templates: an assistant turn that only called tools has content null, and Qwen3's
// template concatenates it); the other fields (tool_calls,
// reasoning_content, tool_call_id, name...) passed through as sent.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace qmpi {

// Throws RequestField naming the message and field for a shape the templates cannot use.
nlohmann::ordered_json normalize_chat_messages(const nlohmann::ordered_json& messages);

// role/content pairs of normalized messages (null content as "").
std::vector<ChatMessage> chat_message_list(const nlohmann::ordered_json& normalized);

}  // namespace qmpi
