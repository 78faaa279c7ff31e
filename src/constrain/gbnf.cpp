#include "constrain/gbnf.h"

#include <cctype>
#include <map>
#include <string>

#include "constrain/codepoints.h"
#include "constrain/syntax_error.h"
#include "text/utf8.h"

namespace qmpi {
namespace {

bool name_char(char c) {
  return std::isalnum(uint8_t(c)) || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view t, Grammar& g) : t_(t), g_(g) {}

  int32_t parse() {
    skip();
    if (done()) fail("the grammar has no rules");
    while (!done()) {
      const size_t name_at = at_;
      const std::string name = this->name();
      skip();
      if (!eat_str("::=")) fail("\"::=\" after the rule name \"" + name + "\"");
      const int32_t r = rule(name, name_at);
      if (g_.defined(r)) {
        at_ = name_at;
        fail("rule \"" + name + "\" is defined twice");
      }
      g_.define(r, alternation());
      skip();
    }
    for (const auto& [name, use] : first_use_)
      if (!g_.defined(rules_.at(name))) {
        at_ = use;
        fail("rule \"" + name + "\" is used but not defined");
      }
    const auto root = rules_.find("root");
    if (root == rules_.end() || !g_.defined(root->second)) {
      at_ = 0;
      fail("the grammar has no rule named \"root\"");
    }
    return root->second;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { raise_syntax_error("grammar", t_, at_, what); }
  bool done() const { return at_ >= t_.size(); }
  char peek() const { return done() ? '\0' : t_[at_]; }
  bool eat(char c) {
    if (done() || t_[at_] != c) return false;
    ++at_;
    return true;
  }
  bool eat_str(std::string_view s) {
    if (t_.substr(at_, s.size()) != s) return false;
    at_ += s.size();
    return true;
  }
  void skip() {
    while (!done()) {
      if (std::isspace(uint8_t(peek()))) {
        ++at_;
      } else if (peek() == '#') {
        while (!done() && peek() != '\n') ++at_;
      } else {
        break;
      }
    }
  }
  std::string name() {
    const size_t start = at_;
    while (!done() && name_char(peek())) ++at_;
    if (at_ == start) fail("a rule name");
    return std::string(t_.substr(start, at_ - start));
  }
  int32_t rule(const std::string& name, size_t at) {
    const auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    first_use_.emplace(name, at);
    return rules_[name] = g_.add_rule(name);
  }
  // Is the text at `at_` the start of the next rule (`name ::=`)?
  bool rule_start() const {
    size_t i = at_;
    while (i < t_.size() && name_char(t_[i])) ++i;
    if (i == at_) return false;
    while (i < t_.size() && std::isspace(uint8_t(t_[i]))) ++i;
    return t_.substr(i, 3) == "::=";
  }

  ExprP alternation() {
    std::vector<ExprP> alts;
    alts.push_back(sequence());
    while (eat('|')) alts.push_back(sequence());
    return gx::alt(std::move(alts));
  }

  ExprP sequence() {
    std::vector<ExprP> items;
    for (;;) {
      skip();
      if (done() || peek() == '|' || peek() == ')' || rule_start()) break;
      ExprP a = atom();
      items.push_back(postfix(std::move(a)));
    }
    return gx::seq(std::move(items));
  }

  int64_t number() {
    int64_t v = 0;
    const size_t start = at_;
    while (!done() && std::isdigit(uint8_t(peek()))) {
      v = v * 10 + (t_[at_++] - '0');
      if (v > 1000000) fail("a repetition bound over 1000000");
    }
    if (at_ == start) fail("a number");
    return v;
  }

  ExprP postfix(ExprP a) {
    for (;;) {
      if (eat('*')) {
        a = gx::repeat(a, 0, -1);
      } else if (eat('+')) {
        a = gx::repeat(a, 1, -1);
      } else if (eat('?')) {
        a = gx::repeat(a, 0, 1);
      } else if (eat('{')) {
        skip();
        int64_t min = peek() == ',' ? 0 : number(), max = min;
        skip();
        if (eat(',')) {
          skip();
          max = peek() == '}' ? -1 : number();
          skip();
        }
        if (!eat('}')) fail("'}' to end the repetition");
        if (max >= 0 && max < min) fail("a repetition {m,n} with n < m");
        a = gx::repeat(a, min, max);
      } else {
        return a;
      }
    }
  }

  char32_t escaped_char() {
    if (done()) fail("an escape at the end of the grammar");
    const char c = t_[at_++];
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return char32_t(c);
      case 'x':
      case 'u':
      case 'U': {
        const int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        char32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          if (done() || !std::isxdigit(uint8_t(peek())))
            fail(std::string("a malformed \\") + c + " escape");
          const char h = t_[at_++];
          v = v * 16 + char32_t(std::isdigit(uint8_t(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
        }
        if (v > kMaxCodepoint) fail("a code point above U+10FFFF");
        return v;
      }
      default:
        --at_;
        fail(std::string("the escape \\") + c + " is not supported");
    }
  }

  char32_t text_char() {
    if (eat('\\')) return escaped_char();
    const size_t before = at_;
    const char32_t c = utf8::decode(t_, at_);
    if (at_ == before) fail("invalid UTF-8");
    return c;
  }

  ExprP atom() {
    if (eat('"')) {
      std::string bytes;
      while (!done() && peek() != '"') utf8::append(bytes, text_char());
      if (!eat('"')) fail("a string without its closing '\"'");
      return gx::lit(bytes);
    }
    if (eat('[')) {
      const bool negate = eat('^');
      CodepointRanges set;
      while (!done() && peek() != ']') {
        const char32_t lo = text_char();
        char32_t hi = lo;
        if (peek() == '-' && at_ + 1 < t_.size() && t_[at_ + 1] != ']') {
          ++at_;
          hi = text_char();
          if (hi < lo) fail("a class range out of order");
        }
        set.push_back({lo, hi});
      }
      if (!eat(']')) fail("a '[' without its ']'");
      return utf8_class(negate ? complement(set) : normalize(set));
    }
    if (eat('.')) return utf8_class({{0, kMaxCodepoint}});
    if (eat('(')) {
      ExprP e = alternation();
      skip();
      if (!eat(')')) fail("a '(' without its ')'");
      return e;
    }
    if (name_char(peek())) {
      const size_t at = at_;
      return gx::ref(rule(name(), at));
    }
    fail(std::string("an unexpected '") + peek() + "'");
  }

  std::string_view t_;
  Grammar& g_;
  size_t at_ = 0;
  std::map<std::string, int32_t> rules_;
  std::map<std::string, size_t> first_use_;
};

}  // namespace

int32_t parse_gbnf(std::string_view text, Grammar& g) {
  return GbnfParser(text, g).parse();
}

}  // namespace qmpi
