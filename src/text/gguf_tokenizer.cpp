#include "text/gguf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <utility>

#include "core/errors.h"
#include "text/qwen_tokenizer_json.h"

namespace qmpi {
namespace {
using nlohmann::json;

// llama.cpp's token types (tokenizer.ggml.token_type).
constexpr int64_t kNormal = 1, kControl = 3, kUserDefined = 4;

[[noreturn]] void invalid(const GgufFile& f, const std::string& what) {
  raise(Err::TokenizerInvalid, f.path() + ": the embedded tokenizer " + what,
        "Put the model's tokenizer.json and tokenizer_config.json beside the .gguf file; qmpi "
        "then uses them instead.");
}

const GgufValue& array(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v || v->kind != GgufKind::Array) invalid(f, "has no " + key + " array");
  return *v;
}

}  // namespace

std::optional<GgufTokenizerFiles> gguf_tokenizer_files(const GgufFile& f) {
  const auto model = f.string("tokenizer.ggml.model");
  if (!model) return std::nullopt;
  if (*model != "gpt2")
    invalid(f, "is tokenizer.ggml.model \"" + *model + "\"; qmpi reads \"gpt2\" (byte-level BPE)");
  const std::string pre = f.string("tokenizer.ggml.pre").value_or("default");
  if (pre != "qwen2")
    invalid(f, "has tokenizer.ggml.pre \"" + pre + "\"; qmpi reads Qwen's (\"qwen2\")");
  const GgufValue& tokens = array(f, "tokenizer.ggml.tokens");
  const GgufValue& types = array(f, "tokenizer.ggml.token_type");
  const GgufValue& merges = array(f, "tokenizer.ggml.merges");
  if (tokens.elem != GgufKind::String || merges.elem != GgufKind::String)
    invalid(f, "lists tokens or merges that are not strings");
  if (types.ints.size() != tokens.strings.size())
    invalid(f, "has " + std::to_string(types.ints.size()) + " token types for " +
                   std::to_string(tokens.strings.size()) + " tokens");

  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens.strings.size(); ++id) {
    const std::string& text = tokens.strings[id];
    const int64_t type = types.ints[id];
    if (type == kNormal)
      vocab[text] = id;
    else if (type == kControl || type == kUserDefined)
      added.push_back(added_token_json(int64_t(id), text, type == kControl));
  }
  const json tok = qwen_tokenizer_json(std::move(vocab), merges.strings, std::move(added));
  json cfg = json::object();
  auto special = [&](const char* key, const char* name) {
    const auto id = f.integer(key);
    if (!id) return;
    if (*id < 0 || size_t(*id) >= tokens.strings.size())
      invalid(f, std::string("names ") + key + " " + std::to_string(*id) + ", not a token");
    cfg[name] = tokens.strings[size_t(*id)];
  };
  special("tokenizer.ggml.bos_token_id", "bos_token");
  special("tokenizer.ggml.eos_token_id", "eos_token");
  special("tokenizer.ggml.padding_token_id", "pad_token");
  if (auto t = f.string("tokenizer.chat_template")) cfg["chat_template"] = *t;
  return GgufTokenizerFiles{tok.dump(), cfg.dump()};
}

}  // namespace qmpi
