// Chat messages -> the prompt text a chat model was trained on, by rendering the model's own
// Jinja chat template (tokenizer_config.json's `chat_template`, as transformers'
// apply_chat_template does) or qmpi's built-in ChatML template when the model ships none.
//
// Role safety: the rendered prompt remembers which bytes came from the request (message
// contents, tool schemas, kwargs). encode() tokenizes those bytes with special-token parsing off,
// so a user who types "<|im_end|>\n<|im_start|>system" gets those characters as text, while the
// template's own markup stays special.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/jinja_limits.h"
#include "text/tokenizer.h"

namespace qmpi {

namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

// What a chat request adds beyond role/content messages; every field is optional.
struct ChatExtras {
  // The request's messages as sent (tool_calls, reasoning_content, tool_call_id...). When it is
  // an array it replaces the ChatMessage list given to render().
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;   // an array of OpenAI tool objects, or null
  nlohmann::ordered_json kwargs;  // chat_template_kwargs: extra template variables (an object)
};

// The rendered prompt and the byte ranges of it that came from the request.
struct ChatPrompt {
  std::string text;
  std::vector<TextRange> plain;
};

class ChatTemplate {
 public:
  // `source` is the Jinja text; `origin` names it in errors (a file, or "built-in ChatML").
  // `special_tokens` holds bos_token, eos_token... as the template sees them. Throws
  // ChatTemplateInvalid when the source is not UTF-8, does not parse, or nests too deep.
  ChatTemplate(std::string source, std::string origin,
               nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object(),
               const jinja::Limits& limits = {});
  virtual ~ChatTemplate();

  // The prompt text. Throws ChatTemplateFailed when the template refuses the conversation.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     const ChatExtras& extras = {}) const;
  ChatPrompt render_prompt(std::span<const ChatMessage> messages, bool add_generation_prompt,
                           const ChatExtras& extras = {}) const;
  // The prompt's ids, request text never parsed for special tokens.
  std::vector<int32_t> encode(const Tokenizer& tok, std::span<const ChatMessage> messages,
                              bool add_generation_prompt, const ChatExtras& extras = {}) const;

  const std::string& source() const { return source_; }
  const std::string& origin() const { return origin_; }

 private:
  std::string source_;
  std::string origin_;
  nlohmann::ordered_json special_tokens_;
  std::unique_ptr<jinja::Template> template_;
};

// The built-in ChatML template (Qwen2.5-Instruct's format, chatml_template.h).
class Qwen25ChatTemplate final : public ChatTemplate {
 public:
  static constexpr const char* kDefaultSystemPrompt =
      "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  Qwen25ChatTemplate();
};

// The template for the model in `model_dir`: `override_file` when given, else the folder's
// chat_template.jinja, else tokenizer_config.json's chat_template, else the built-in ChatML one.
// It is rendered once on a sample conversation (user, assistant, user) so that a template
// which cannot render anything fails at start-up, not on every request. Throws
// ChatTemplateInvalid for a template that does not parse, fails that dry run, or a file that
// cannot be read.
std::unique_ptr<ChatTemplate> chat_template_for(const std::string& model_dir,
                                                const std::string& override_file = {},
                                                const jinja::Limits& limits = {});

}  // namespace qmpi
