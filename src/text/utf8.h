// UTF-8 scanning shared by the tokenizer and the streaming decoder. Ill-formed bytes are
// replaced the way Hugging Face's decoder (Rust's from_utf8_lossy) and Python's
// errors="replace" do it: one U+FFFD per maximal subpart of an ill-formed sequence (Unicode
// ch. 3, "U+FFFD Substitution of Maximal Subparts"), so our text matches theirs byte for byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qmpi::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// What the bytes at the start of a buffer hold.
struct Unit {
  enum Kind : uint8_t {
    Char,        // a well-formed character of `len` bytes
    Invalid,     // `len` ill-formed bytes that one U+FFFD replaces
    Incomplete,  // a valid prefix of a character cut off by the end of the buffer
  };
  Kind kind;
  size_t len;
};

// Classifies the unit at the start of `s` (which must not be empty).
Unit next_unit(std::string_view s);

// The byte offset of the first ill-formed or truncated unit, or s.size() when `s` is valid.
size_t find_invalid(std::string_view s);

// `s` with every ill-formed unit (a truncated tail included) replaced by U+FFFD.
std::string make_valid(std::string_view s);

// Decodes the character at `s[i]`, which must be well-formed, and advances `i` past it.
char32_t decode(std::string_view s, size_t& i);

void append(std::string& out, char32_t cp);

}  // namespace qmpi::utf8
