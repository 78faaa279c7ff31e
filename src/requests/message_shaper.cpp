#include "requests/message_shaper.h"

#include "text/partial_tag.h"

namespace qmpi {
namespace {

constexpr std::string_view kThink = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

MessageShaper::MessageShaper(const OutputFormat& format, std::string call_id_prefix)
    : format_(format) {
  if (format_.tools) tools_.emplace(std::move(call_id_prefix));
  if (format_.reasoning) stage_ = format_.in_reasoning ? Stage::Reasoning : Stage::Start;
  if (!format_.prefill.empty()) carry_ = feed(format_.prefill);
}

void MessageShaper::keep_calls(std::vector<ToolCall>& from, MessageDelta& out) {
  for (ToolCall& c : from) {
    if (format_.single_call && calls_ > 0) continue;
    ++calls_;
    out.calls.push_back(std::move(c));
  }
}

void MessageShaper::content(std::string_view text, bool at_end, MessageDelta& out) {
  if (!tools_) {
    out.content += text;
    return;
  }
  ToolCallDelta d = tools_->feed(text);
  if (at_end) {
    ToolCallDelta rest = tools_->finish();
    d.content += rest.content;
    for (ToolCall& c : rest.calls) d.calls.push_back(std::move(c));
  }
  out.content += d.content;
  keep_calls(d.calls, out);
}

void MessageShaper::step(bool at_end, MessageDelta& out) {
  for (;;) {
    switch (stage_) {
      case Stage::Start: {
        // Is the answer a <think> block? Leading whitespace and a partial tag wait.
        const size_t lead = held_.find_first_not_of(" \t\r\n");
        const std::string_view rest =
            lead == std::string::npos ? std::string_view() : std::string_view(held_).substr(lead);
        if (rest.starts_with(kThink)) {
          held_.erase(0, lead + kThink.size());
          stage_ = Stage::Reasoning;
          continue;
        }
        if (!at_end && kThink.starts_with(rest)) return;  // (rest may be empty)
        stage_ = Stage::Content;
        continue;
      }
      case Stage::Reasoning: {
        if (!reasoning_begun_) {
          const size_t first = held_.find_first_not_of('\n');
          held_.erase(0, first == std::string::npos ? held_.size() : first);
          reasoning_begun_ = !held_.empty();
        }
        const size_t end = held_.find(kThinkEnd);
        if (end != std::string::npos) {
          std::string_view r = std::string_view(held_).substr(0, end);
          while (!r.empty() && r.back() == '\n') r.remove_suffix(1);
          out.reasoning += r;
          held_.erase(0, end + kThinkEnd.size());
          stage_ = Stage::AfterReasoning;
          continue;
        }
        // Hold what may still be "</think>" and the newlines before it.
        size_t keep = at_end ? 0 : partial_tag_suffix(held_, kThinkEnd);
        size_t cut = held_.size() - keep;
        while (cut > 0 && held_[cut - 1] == '\n') --cut;
        if (!at_end) keep = held_.size() - cut;
        out.reasoning += held_.substr(0, cut);
        held_.erase(0, held_.size() - keep);
        return;
      }
      case Stage::AfterReasoning: {
        const size_t first = held_.find_first_not_of('\n');
        if (first == std::string::npos) {
          held_.clear();
          return;
        }
        held_.erase(0, first);
        stage_ = Stage::Content;
        continue;
      }
      case Stage::Content: {
        std::string text = std::move(held_);
        held_.clear();
        content(text, at_end, out);
        return;
      }
    }
  }
}

MessageDelta MessageShaper::feed(std::string_view text) {
  MessageDelta out = std::move(carry_);
  carry_ = {};
  if (stage_ == Stage::Content) {
    content(text, false, out);
    return out;
  }
  held_.append(text);
  step(false, out);
  return out;
}

MessageDelta MessageShaper::finish() {
  MessageDelta out = std::move(carry_);
  carry_ = {};
  step(true, out);
  return out;
}

ShapedMessage shape_message(const OutputFormat& format, std::string_view text,
                            const std::string& call_id_prefix) {
  MessageShaper shaper(format, call_id_prefix);
  MessageDelta all = shaper.feed(text);
  MessageDelta rest = shaper.finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  for (ToolCall& c : rest.calls) all.calls.push_back(std::move(c));
  ShapedMessage m;
  const bool said_else = !all.calls.empty() || !all.reasoning.empty();
  if (!(said_else && blank(all.content))) m.content = std::move(all.content);
  if (format.reasoning && !all.reasoning.empty()) m.reasoning = std::move(all.reasoning);
  m.calls = std::move(all.calls);
  return m;
}

std::string call_id_prefix(int64_t response_no, size_t choice) {
  return "call_" + std::to_string(response_no) + "_" + std::to_string(choice) + "_";
}

std::string message_finish_reason(const std::string& reason, size_t calls) {
  return calls > 0 && reason == "stop" ? "tool_calls" : reason;
}

}  // namespace qmpi
