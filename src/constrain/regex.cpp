#include "constrain/regex.h"

#include <cctype>
#include <cstdio>
#include <string>

#include "constrain/syntax_error.h"
#include "core/errors.h"
#include "text/utf8.h"

namespace qmpi {

ExprP char_expr(const CodepointRanges& chars, bool json_string) {
  if (!json_string) return utf8_class(chars);
  const CodepointRanges escaped = normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  std::vector<ExprP> alts;
  const CodepointRanges plain = subtract(chars, escaped);
  if (!plain.empty()) alts.push_back(utf8_class(plain));
  static const char* const kShort[32] = {nullptr, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, nullptr, "\\b",   "\\t",
                                         "\\n",   nullptr, "\\f",   "\\r"};
  for (char32_t c = 0; c < 0x20; ++c)
    if (contains(chars, c)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      alts.push_back(gx::lit(kShort[c] ? kShort[c] : buf));
    }
  if (contains(chars, '"')) alts.push_back(gx::lit("\\\""));
  if (contains(chars, '\\')) alts.push_back(gx::lit("\\\\"));
  return gx::alt(std::move(alts));
}

namespace {

const CodepointRanges kDigit = {{'0', '9'}};
const CodepointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodepointRanges kSpace = {
    {'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CodepointRanges kLineEnds = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

class RegexParser {
 public:
  RegexParser(std::string_view p, RegexMode mode) : p_(p), mode_(mode) {}

  ExprP parse() {
    ExprP e = alternation(true);
    if (at_ < p_.size()) fail("an unmatched ')'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    raise_syntax_error("regex", p_, at_, what);
  }
  bool done() const { return at_ >= p_.size(); }
  char peek() const { return done() ? '\0' : p_[at_]; }
  bool eat(char c) {
    if (peek() != c || done()) return false;
    ++at_;
    return true;
  }
  char32_t next_char() {
    const size_t before = at_;
    const char32_t c = utf8::decode(p_, at_);
    if (at_ == before) fail("invalid UTF-8");
    return c;
  }
  ExprP chars(const CodepointRanges& r) const { return char_expr(r, mode_.json_string); }
  ExprP any() const { return gx::repeat(chars({{0, kMaxCodepoint}}), 0, -1); }

  ExprP alternation(bool top) {
    std::vector<ExprP> alts;
    do alts.push_back(concat(top));
    while (eat('|'));
    return gx::alt(std::move(alts));
  }

  ExprP concat(bool top) {
    std::vector<ExprP> items;
    bool start_anchor = false, end_anchor = false;
    while (!done() && peek() != '|' && peek() != ')') {
      if (peek() == '^' || peek() == '$') {
        const bool first = items.empty() && !start_anchor;
        const char a = p_[at_++];
        const bool last = done() || peek() == '|' || peek() == ')';
        if (!top || (a == '^' && !first) || (a == '$' && !last))
          fail("an anchor inside the pattern (only ^ at the start and $ at the end are supported)");
        (a == '^' ? start_anchor : end_anchor) = true;
        continue;
      }
      items.push_back(quantified());
    }
    if (top && mode_.search) {
      if (!start_anchor) items.insert(items.begin(), any());
      if (!end_anchor) items.push_back(any());
    }
    return gx::seq(std::move(items));
  }

  bool number(int64_t& v) {
    const size_t start = at_;
    v = 0;
    while (!done() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (p_[at_++] - '0');
      if (v > 1000000) fail("a repetition bound over 1000000");
    }
    return at_ > start;
  }

  ExprP quantified() {
    ExprP atom = this->atom();
    for (;;) {
      int64_t min = 0, max = -1;
      const size_t before = at_;
      if (eat('*')) {
      } else if (eat('+')) {
        min = 1;
      } else if (eat('?')) {
        max = 1;
      } else if (eat('{')) {
        if (!number(min)) {
          at_ = before;  // a literal '{' (ECMAScript allows it outside a quantifier)
          return atom;
        }
        if (eat(',')) {
          if (!number(max)) max = -1;
        } else {
          max = min;
        }
        if (!eat('}')) {
          at_ = before;
          return atom;
        }
        if (max >= 0 && max < min) fail("a repetition {m,n} with n < m");
      } else {
        return atom;
      }
      eat('?');  // lazy: the same strings
      if (peek() == '*' || peek() == '+' || peek() == '?') fail("nothing to repeat");
      atom = gx::repeat(atom, min, max);
    }
  }

  ExprP atom() {
    const size_t start = at_;
    if (eat('(')) {
      if (eat('?')) {
        if (eat(':')) {
        } else if (eat('<') && peek() != '=' && peek() != '!') {
          while (!done() && peek() != '>') ++at_;
          if (!eat('>')) fail("an unterminated group name");
        } else {
          at_ = start;
          fail("lookaround groups are not supported");
        }
      }
      ExprP e = alternation(false);
      if (!eat(')')) fail("a '(' without its ')'");
      return e;
    }
    if (eat('[')) return chars(char_class());
    if (eat('.')) return chars(complement(kLineEnds));
    if (peek() == '*' || peek() == '+' || peek() == '?') fail("nothing to repeat");
    if (eat('\\')) return chars(escape(false));
    const char32_t c = next_char();
    return chars({{c, c}});
  }

  // After a backslash; `in_class` allows \b (backspace) and \- there.
  CodepointRanges escape(bool in_class) {
    if (done()) fail("a pattern ending in a backslash");
    const size_t start = at_;
    const char c = p_[at_++];
    switch (c) {
      case 'd':
        return kDigit;
      case 'D':
        return complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return complement(kSpace);
      case 'n':
        return {{'\n', '\n'}};
      case 't':
        return {{'\t', '\t'}};
      case 'r':
        return {{'\r', '\r'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'x':
      case 'u': {
        char32_t v = 0;
        const bool braces = c == 'u' && eat('{');
        const int digits = c == 'x' ? 2 : 4;
        int n = 0;
        while (!done() && std::isxdigit(uint8_t(peek())) && (braces || n < digits)) {
          v = v * 16 + char32_t(std::stoi(std::string(1, p_[at_++]), nullptr, 16));
          ++n;
          if (v > kMaxCodepoint) fail("a code point above U+10FFFF");
        }
        if ((braces && !eat('}')) || n == 0 || (!braces && n != digits))
          fail(std::string("a malformed \\") + c + " escape");
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        break;
      default:
        if (!std::isalnum(uint8_t(c))) {
          at_ = start;
          const char32_t lit = next_char();
          return {{lit, lit}};
        }
    }
    at_ = start - 1;
    if (c >= '1' && c <= '9') fail("backreferences are not supported");
    if (c == 'b' || c == 'B') fail("word boundaries (\\b, \\B) are not supported");
    if (c == 'p' || c == 'P') fail("Unicode property classes (\\p) are not supported");
    fail(std::string("the escape \\") + c + " is not supported");
  }

  // After '[': the class up to its ']'.
  CodepointRanges char_class() {
    const bool negate = eat('^');
    CodepointRanges set;
    while (!done() && peek() != ']') {
      CodepointRanges lo_set = class_atom();
      if (peek() == '-' && at_ + 1 < p_.size() && p_[at_ + 1] != ']' && lo_set.size() == 1 &&
          lo_set[0].first == lo_set[0].second) {
        ++at_;
        const size_t range_at = at_;
        CodepointRanges hi_set = class_atom();
        if (hi_set.size() != 1 || hi_set[0].first != hi_set[0].second) {
          at_ = range_at;
          fail("a class range with a class (\\d, \\w...) as its end");
        }
        if (hi_set[0].first < lo_set[0].first) {
          at_ = range_at;
          fail("a class range out of order");
        }
        set.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        set.insert(set.end(), lo_set.begin(), lo_set.end());
      }
    }
    if (!eat(']')) fail("a '[' without its ']'");
    return negate ? complement(set) : normalize(set);
  }

  CodepointRanges class_atom() {
    if (eat('\\')) return escape(true);
    const char32_t c = next_char();
    return {{c, c}};
  }

  std::string_view p_;
  RegexMode mode_;
  size_t at_ = 0;
};

}  // namespace

ExprP regex_expr(std::string_view pattern, RegexMode mode) {
  return RegexParser(pattern, mode).parse();
}

}  // namespace qmpi
