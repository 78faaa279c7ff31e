#include "text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "text/chatml_template.h"
#include "text/gguf_tokenizer.h"
#include "text/jinja_template.h"
#include "text/utf8.h"

namespace qmpi {
namespace {

using OJson = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tokenizer_config.json writes a special token as "<|im_end|>" or as {"content": "<|im_end|>"}.
OJson special_tokens_of(const OJson& config) {
  OJson out = OJson::object();
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (!config.contains(key)) continue;
    const OJson& v = config.at(key);
    if (v.is_string())
      out[key] = v;
    else if (v.is_object() && v.contains("content") && v.at("content").is_string())
      out[key] = v.at("content");
  }
  return out;
}

// A template's bytes are the template's fault, not the prompt's: checked before parsing so the
// tokenizer never meets them in a rendered prompt.
const std::string& utf8_source(const std::string& source, const std::string& origin) {
  if (const size_t bad = utf8::find_invalid(source); bad < source.size())
    raise(Err::ChatTemplateInvalid,
          origin + " is not UTF-8 text: the byte at offset " + std::to_string(bad) +
              " starts no valid character",
          "Save the template as UTF-8.");
  return source;
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string origin, OJson special_tokens,
                           const jinja::Limits& limits)
    : source_(std::move(source)),
      origin_(std::move(origin)),
      special_tokens_(std::move(special_tokens)),
      template_(std::make_unique<jinja::Template>(utf8_source(source_, origin_), origin_, limits)) {
}

ChatTemplate::~ChatTemplate() = default;

ChatPrompt ChatTemplate::render_prompt(std::span<const ChatMessage> messages,
                                       bool add_generation_prompt, const ChatExtras& extras) const {
  // The variables transformers' apply_chat_template passes: messages, tools, documents,
  // add_generation_prompt, the tokenizer's special tokens, then the caller's kwargs.
  std::map<std::string, jinja::Value> vars;
  for (const auto& [k, v] : special_tokens_.items()) vars[k] = jinja::Value::literal(v);
  OJson msgs = extras.messages;
  if (!msgs.is_array()) {
    msgs = OJson::array();
    for (const ChatMessage& m : messages)
      msgs.push_back({{"role", m.role}, {"content", m.content}});
  }
  vars["messages"] = jinja::Value::data(std::move(msgs));
  vars["tools"] = jinja::Value::data(extras.tools.is_array() ? extras.tools : OJson(nullptr));
  vars["documents"] = jinja::Value::literal(OJson(nullptr));
  vars["add_generation_prompt"] = jinja::Value::literal(OJson(add_generation_prompt));
  if (extras.kwargs.is_object())
    for (const auto& [k, v] : extras.kwargs.items()) vars[k] = jinja::Value::data(v);

  jinja::Rendered r = template_->render(vars);
  ChatPrompt out{std::move(r.text), {}};
  for (const jinja::Span& s : r.plain) out.plain.push_back({s.begin, s.end});
  return out;
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 const ChatExtras& extras) const {
  return render_prompt(messages, add_generation_prompt, extras).text;
}

std::vector<int32_t> ChatTemplate::encode(const Tokenizer& tok,
                                          std::span<const ChatMessage> messages,
                                          bool add_generation_prompt,
                                          const ChatExtras& extras) const {
  const ChatPrompt p = render_prompt(messages, add_generation_prompt, extras);
  return tok.encode(p.text, p.plain);
}

Qwen25ChatTemplate::Qwen25ChatTemplate()
    : ChatTemplate(kChatMlTemplate, "built-in ChatML template") {}

namespace {

std::unique_ptr<ChatTemplate> find_chat_template(const std::string& model_dir,
                                                 const std::string& override_file,
                                                 const jinja::Limits& limits) {
  fs::path dir(model_dir);
  // A GGUF model: the files beside it win over the template it embeds.
  std::optional<std::string> config_text;
  std::string config_origin;
  if (is_gguf_path(model_dir)) {
    dir = dir.parent_path();
    if (!fs::exists(dir / "tokenizer_config.json") && !fs::exists(dir / "chat_template.jinja") &&
        fs::exists(model_dir))
      if (auto files = gguf_tokenizer_files(GgufFile(model_dir))) {
        config_text = files->config_json;
        config_origin = model_dir + " tokenizer.chat_template";
      }
  }
  if (!config_text) {
    config_text = read_file(dir / "tokenizer_config.json");
    config_origin = (dir / "tokenizer_config.json").string() + " chat_template";
  }
  OJson config = OJson::object();
  if (auto& text = config_text) {
    try {
      config = OJson::parse(*text);
    } catch (const OJson::parse_error&) {
      config = OJson::object();  // the tokenizer loader reports a broken config
    }
  }
  const OJson special = config.is_object() ? special_tokens_of(config) : OJson::object();
  if (!override_file.empty()) {
    auto text = read_file(override_file);
    // As vLLM's --chat-template: a file, or the template itself on one line.
    if (!text && (override_file.find("{{") != std::string::npos ||
                  override_file.find("{%") != std::string::npos))
      return std::make_unique<ChatTemplate>(override_file, "--chat-template", special, limits);
    if (!text)
      raise(Err::InputFile, "cannot read the chat template file " + override_file,
            "Give --chat-template a readable Jinja file (or the template itself, as vLLM takes "
            "it).");
    return std::make_unique<ChatTemplate>(std::move(*text), override_file, special, limits);
  }
  if (auto text = read_file(dir / "chat_template.jinja"))
    return std::make_unique<ChatTemplate>(std::move(*text), (dir / "chat_template.jinja").string(),
                                          special, limits);
  const std::string& origin = config_origin;
  if (config.is_object() && config.contains("chat_template")) {
    const OJson& t = config.at("chat_template");
    if (t.is_string())
      return std::make_unique<ChatTemplate>(t.get<std::string>(), origin, special, limits);
    // Named templates ([{"name": "default", "template": ...}, ...]): the default one.
    if (t.is_array())
      for (const OJson& named : t)
        if (named.is_object() && named.value("name", "") == "default" &&
            named.contains("template") && named.at("template").is_string())
          return std::make_unique<ChatTemplate>(named.at("template").get<std::string>(),
                                                origin + " (default)", special, limits);
  }
  return std::make_unique<Qwen25ChatTemplate>();
}

}  // namespace

std::unique_ptr<ChatTemplate> chat_template_for(const std::string& model_dir,
                                                const std::string& override_file,
                                                const jinja::Limits& limits) {
  auto chat = find_chat_template(model_dir, override_file, limits);
  const ChatMessage sample[] = {
      {"user", "Hello."}, {"assistant", "Hello! How can I help?"}, {"user", "Say hi."}};
  try {
    chat->render(sample, /*add_generation_prompt=*/true);
  } catch (const Error& e) {
    if (e.code() != Err::ChatTemplateFailed) throw;
    raise(
        Err::ChatTemplateInvalid,
        chat->origin() + " fails on a sample conversation (user, assistant, user): " + e.message(),
        "Fix the template, or pass one that renders with --chat-template FILE.");
  }
  return chat;
}

}  // namespace qmpi
