// The tokenizer and chat template a GGUF file embeds (tokenizer.ggml.*, tokenizer.chat_template),
// rewritten as the tokenizer.json and tokenizer_config.json a Hugging Face release of the model
// carries, so the one tokenizer loader builds the same Tokenizer from either.
//
// GGUF keeps llama.cpp's view: tokenizer.ggml.model "gpt2" (byte-level BPE), tokens with a type
// each (1 normal, 3 control = special added token, 4 user-defined = added token, 5 unused
// padding), merges "a b", the special ids, and tokenizer.ggml.pre naming the pre-tokenizer
// ("qwen2": Qwen's split regex). It has no normalizer: Qwen's tokenizer.json applies NFC, so for
// pre "qwen2" the rewrite applies it too (llama.cpp does not; text already in NFC, nearly all
// text, tokenizes the same either way).
#pragma once
#include <optional>
#include <string>

#include "io/gguf_file.h"

namespace qmpi {

struct GgufTokenizerFiles {
  std::string tokenizer_json;
  std::string config_json;  // eos/pad/bos tokens and chat_template
};

// Nullopt when the file has no tokenizer.ggml.model. Throws TokenizerInvalid for a model other
// than "gpt2", a pre-tokenizer other than "qwen2", or arrays that disagree in length.
std::optional<GgufTokenizerFiles> gguf_tokenizer_files(const GgufFile& f);

}  // namespace qmpi
