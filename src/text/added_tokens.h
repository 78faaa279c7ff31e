// Added tokens (Qwen's <|im_start|>, <tool_call>, ...): strings matched whole on the input before
// the rest of the pipeline sees it, the way Hugging Face's AddedVocabulary does it: leftmost-
// longest match over all contents, then the token's flags decide whether the match stands
// (special tokens when special parsing is off, single_word inside a word) and how far it reaches
// (lstrip/rstrip swallow adjacent whitespace). A match that does not stand is left as plain text;
// the search goes on after it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qmpi {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // dropped by decode(skip_special); not parsed when parsing is off
  bool lstrip = false;       // the match takes the whitespace before it
  bool rstrip = false;       // the match takes the whitespace after it
  bool single_word = false;  // matches only where no word character touches it
  bool normalized = false;   // matched on the normalized text instead of the raw text
};

// A stretch of the input: either plain text or one added token.
struct TextSegment {
  size_t begin;
  size_t end;
  int32_t id;  // -1 for plain text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // Appends the segments of `text` (valid UTF-8) to `out`; they cover `text` in order.
  // `plain` (sorted, disjoint byte ranges of `text`): special tokens overlapping them are text.
  void split(std::string_view text, bool parse_special, std::vector<TextSegment>& out,
             std::span<const std::pair<size_t, size_t>> plain = {}) const;

  bool empty() const { return tokens_.empty(); }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // byte -> child node
    int32_t token = -1;                             // index into tokens_ where a content ends
  };
  int32_t child(int32_t node, uint8_t b) const;
  // The longest content starting at text[pos]: {index into tokens_, length}, or {-1, 0}.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
};

}  // namespace qmpi
