#include "text/chat_template.h"

#include "core/errors.h"

namespace qmpi {
namespace {

void append_turn(std::string& out, std::string_view role, std::string_view content) {
  out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
}

}  // namespace

std::string Qwen25ChatTemplate::render(std::span<const ChatMessage> messages,
                                       bool add_generation_prompt) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      raise(Err::RequestField,
            "message " + std::to_string(i) + " has role '" + role +
                "', which the Qwen2.5 chat template does not support",
            "Use the roles system, user and assistant.");
  }
  std::string out;
  if (messages.empty() || messages.front().role != "system")
    append_turn(out, "system", kDefaultSystemPrompt);
  for (const ChatMessage& m : messages) append_turn(out, m.role, m.content);
  if (add_generation_prompt) out.append("<|im_start|>assistant\n");
  return out;
}

std::unique_ptr<ChatTemplate> chat_template_for(const std::string& model_dir) {
  return std::make_unique<Qwen25ChatTemplate>();
}

}  // namespace qmpi
