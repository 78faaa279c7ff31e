// Chat messages -> the prompt text a chat model was trained on. Qwen2.5-Instruct uses ChatML:
//   <|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
// with a default system turn when the conversation does not start with one. Templates are a
// seam: chat_template_for() picks one per model (later from the model's tokenizer_config.json).
#pragma once
#include <memory>
#include <span>
#include <string>

namespace qmpi {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // Throws RequestField for a role the template does not know.
  virtual std::string render(std::span<const ChatMessage> messages,
                             bool add_generation_prompt) const = 0;
};

class Qwen25ChatTemplate final : public ChatTemplate {
 public:
  static constexpr const char* kDefaultSystemPrompt =
      "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

  std::string render(std::span<const ChatMessage> messages,
                     bool add_generation_prompt) const override;
};

// The template for the model in `model_dir` (the Qwen2.5 one for every model so far).
std::unique_ptr<ChatTemplate> chat_template_for(const std::string& model_dir);

}  // namespace qmpi
