// The tokenizer.json of a Qwen release, built from its parts: byte-level BPE with Qwen's NFC
// normalizer, its split regex then byte-level pre-tokenizer, and the byte-level decoder. The GGUF
// rewrite (gguf_tokenizer.h) builds one from a file's tokenizer.ggml.* arrays; the tests build
// tiny ones the same way, so both go through the loader exactly as a release's file does.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace qmpi {

// Qwen2's (and Qwen3's) pre-tokenizer split, as their tokenizer.json states it.
inline constexpr const char* kQwenSplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// `vocab`: {"token": id, ...} of the BPE model; `merges`: "a b" strings or ["a", "b"] pairs, in
// merge order; `added_tokens`: objects of added_token_json's form.
nlohmann::json qwen_tokenizer_json(nlohmann::json vocab, nlohmann::json merges,
                                   nlohmann::json added_tokens);

// One entry of tokenizer.json's added_tokens, its other flags (normalized, lstrip, rstrip,
// single_word) false.
nlohmann::json added_token_json(int64_t id, const std::string& content, bool special);

}  // namespace qmpi
