// A Hugging Face tokenizer.json of the byte-level BPE kind (Qwen2, Qwen2.5, Qwen3), producing the
// same ids as Hugging Face's `tokenizers` with add_special_tokens=false:
//   added tokens matched on the raw text -> NFC -> added tokens with `normalized` -> Split regex
//   (Isolated) -> byte-level bytes -> BPE by merge rank.
// decode() maps ids back to bytes and replaces ill-formed UTF-8 with U+FFFD (errors="replace").
// Tokenizer files this pipeline cannot reproduce are rejected at load with the reason.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qmpi {

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

class Tokenizer {
 public:
  // `path` is a model folder (holding tokenizer.json) or the tokenizer.json itself; a
  // tokenizer_config.json beside it supplies eos/pad. Throws TokenizerMissing when there is no
  // tokenizer.json, TokenizerInvalid (naming the file and the entry) when it cannot be used.
  static Tokenizer load(const std::string& path);
  // The same from file contents; `config_json` may be empty. `source` names them in errors.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json,
                             const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `text` must be valid UTF-8 (RequestField otherwise). With parse_special=false, special added
  // tokens are plain text (Hugging Face's split_special_tokens); non-special ones still match.
  // Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Special tokens parsed everywhere except in the `plain` ranges (sorted, disjoint): a special
  // token whose match touches a plain byte stays text. Text without special look-alikes in the
  // plain ranges gets exactly encode(text)'s ids. Used for chat prompts, where the ranges are
  // the request's own text.
  std::vector<int32_t> encode(std::string_view text, std::span<const TextRange> plain) const;
  // Throws RequestField for an id outside [0, vocab_size()) or one no token has.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;  // vocab spelling ("Ġthe")
  std::optional<std::string> id_to_token(int32_t id) const;
  // The raw bytes `id` stands for in decoded text (possibly part of a character).
  // Precondition: has_token(id).
  std::string_view token_bytes(int32_t id) const;
  bool has_token(int32_t id) const;
  bool is_special(int32_t id) const;

  // Regular vocabulary plus added tokens: one more than the largest id.
  int32_t vocab_size() const;
  std::optional<int32_t> eos_id() const;  // tokenizer_config.json's eos_token
  std::optional<int32_t> pad_id() const;  // tokenizer_config.json's pad_token
  const std::string& source() const;      // the tokenizer.json it came from

  struct Impl;  // opaque here; its loader and runtime share src/text/tokenizer_impl.h

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::vector<int32_t> encode_impl(std::string_view text, bool parse_special,
                                   std::span<const std::pair<size_t, size_t>> plain) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qmpi
