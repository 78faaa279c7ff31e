#include "text/qwen_tokenizer_json.h"

#include <utility>

namespace qmpi {
namespace {
using nlohmann::json;

json byte_level() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

}  // namespace

json qwen_tokenizer_json(json vocab, json merges, json added_tokens) {
  const json split = {{"type", "Split"},
                      {"pattern", {{"Regex", kQwenSplitRegex}}},
                      {"behavior", "Isolated"},
                      {"invert", false}};
  return {{"version", "1.0"},
          {"added_tokens", std::move(added_tokens)},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level()})}}},
          {"decoder", byte_level()},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", std::move(vocab)},
            {"merges", std::move(merges)}}}};
}

json added_token_json(int64_t id, const std::string& content, bool special) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

}  // namespace qmpi
