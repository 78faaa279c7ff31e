#include "text/added_tokens.h"

#include <utf8proc.h>

#include "text/utf8.h"

namespace qmpi {
namespace {

// Unicode White_Space, the set Hugging Face's `\s` strips for lstrip/rstrip.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// A regex word character (`\w` in Unicode mode): letters, marks, decimal digits, letter numbers,
// connector punctuation and the two joiners.
bool is_word_char(char32_t c) {
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// The code point that ends just before byte `pos` (pos > 0).
char32_t char_before(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return utf8::decode(text, start);
}

char32_t char_at(std::string_view text, size_t pos) {
  return utf8::decode(text, pos);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  trie_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    first_byte_[static_cast<uint8_t>(s[0])] = true;
    int32_t node = 0;
    for (char c : s) {
      const auto b = static_cast<uint8_t>(c);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        trie_[node].next.emplace_back(b, next);
        trie_.emplace_back();
      }
      node = next;
    }
    if (trie_[node].token < 0) trie_[node].token = static_cast<int32_t>(t);
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t b) const {
  for (const auto& [byte, next] : trie_[node].next)
    if (byte == b) return next;
  return -1;
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    if (trie_[node].token >= 0) best = {trie_[node].token, i + 1 - pos};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special,
                              std::vector<TextSegment>& out,
                              std::span<const std::pair<size_t, size_t>> plain) const {
  size_t next_plain = 0;  // the first plain range that does not end before `pos`
  auto touches_plain = [&](size_t b, size_t e) {
    while (next_plain < plain.size() && plain[next_plain].second <= b) ++next_plain;
    return next_plain < plain.size() && plain[next_plain].first < e;
  };
  size_t done = 0;  // text before this offset is already in `out`
  size_t pos = 0;   // where the search for the next match starts
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [t, len] = longest_at(text, pos);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[t];
    size_t start = pos;
    size_t stop = pos + len;
    pos = stop;
    if (tok.special && (!parse_special || touches_plain(start, stop))) continue;
    if (tok.single_word && ((start > 0 && is_word_char(char_before(text, start))) ||
                            (stop < text.size() && is_word_char(char_at(text, stop)))))
      continue;
    if (tok.lstrip) {
      while (start > done && is_white_space(char_before(text, start))) {
        --start;
        while ((static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!is_white_space(utf8::decode(text, next))) break;
        stop = next;
      }
      pos = stop;
    }
    if (start > done) out.push_back({done, start, -1});
    out.push_back({start, stop, tok.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({done, text.size(), -1});
}

}  // namespace qmpi
