#include "text/tool_call_parser.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "text/jinja_value.h"
#include "text/partial_tag.h"

namespace qmpi {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

std::optional<ToolCall> parse_block(std::string_view body) {
  using OJson = nlohmann::ordered_json;
  OJson j;
  try {
    j = OJson::parse(body);
  } catch (const OJson::parse_error&) {
    return std::nullopt;
  }
  if (!j.is_object() || !j.contains("name") || !j.at("name").is_string()) return std::nullopt;
  ToolCall call;
  call.name = j.at("name").get<std::string>();
  const OJson args = j.value("arguments", OJson::object());
  if (args.is_string())
    call.arguments = args.get<std::string>();
  else if (args.is_object())
    call.arguments = jinja::py_json_dumps(args);  // vLLM's spelling
  else
    return std::nullopt;
  return call;
}

bool all_space(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

void ToolCallParser::drain(ToolCallDelta& out, bool at_end) {
  while (!pending_.empty()) {
    if (!in_call_) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = at_end ? 0 : partial_tag_suffix(pending_, kOpen);
        std::string text = pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        // Between and after calls the model writes newlines; they are not content.
        if (!(next_index_ > 0 && all_space(text))) out.content += text;
        return;
      }
      std::string text = pending_.substr(0, open);
      if (!(next_index_ > 0 && all_space(text))) out.content += text;
      pending_.erase(0, open + kOpen.size());
      in_call_ = true;
      continue;
    }
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) {
      if (at_end) {  // an unclosed block: what the model wrote, as content
        out.content += std::string(kOpen) + pending_;
        pending_.clear();
        in_call_ = false;
      }
      return;
    }
    const std::string body = pending_.substr(0, close);
    pending_.erase(0, close + kClose.size());
    in_call_ = false;
    if (auto call = parse_block(body)) {
      call->id = id_prefix_ + std::to_string(next_index_++);
      out.calls.push_back(std::move(*call));
    } else {
      out.content += std::string(kOpen) + body + std::string(kClose);
    }
  }
}

ToolCallDelta ToolCallParser::feed(std::string_view text) {
  pending_.append(text);
  ToolCallDelta out;
  drain(out, false);
  return out;
}

ToolCallDelta ToolCallParser::finish() {
  ToolCallDelta out;
  drain(out, true);
  return out;
}

ParsedToolCalls parse_tool_calls(std::string_view text, const std::string& id_prefix) {
  ToolCallParser p(id_prefix);
  ToolCallDelta a = p.feed(text);
  ToolCallDelta b = p.finish();
  ParsedToolCalls out{a.content + b.content, std::move(a.calls)};
  for (ToolCall& c : b.calls) out.calls.push_back(std::move(c));
  return out;
}

}  // namespace qmpi
