#include "text/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/errors.h"

namespace qmpi::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& name) : src_(std::move(source)), name_(name) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool strip_next = false;  // the previous tag ended with '-'
    while (pos < src_.size()) {
      const size_t tag = find_tag(pos);
      std::string text = src_.substr(pos, tag - pos);
      if (strip_next) {
        size_t i = 0;
        while (i < text.size() && is_space(text[i])) ++i;
        text.erase(0, i);
      }
      strip_next = false;
      if (tag == src_.size()) {
        emit_text(std::move(text), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char mod = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (kind != '{' && mod != '+') {
        lstrip(text, pos);
      }
      emit_text(std::move(text), pos);
      pos = tag + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t close = src_.find("#}", pos);
        if (close == std::string::npos) fail(line_at(tag), "a comment is not closed with #}");
        strip_next = close > pos && src_[close - 1] == '-';
        pos = close + 2;
        if (!strip_next) pos = trim_newline(pos);
        continue;
      }
      pos = lex_tag(kind, pos, tag, strip_next);
    }
    tokens_.push_back({Token::End, "", line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  // lstrip_blocks: drop spaces and tabs between the start of the line and a block tag.
  void lstrip(std::string& text, size_t text_start) const {
    const size_t nl = text.rfind('\n');
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    const bool line_start =
        nl != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
    if (!line_start) return;
    for (size_t i = from; i < text.size(); ++i)
      if (!is_space(text[i])) return;
    text.erase(from);
  }

  size_t trim_newline(size_t pos) const {
    return pos < src_.size() && src_[pos] == '\n' ? pos + 1 : pos;
  }

  void emit_text(std::string text, size_t at) {
    if (!text.empty()) tokens_.push_back({Token::Text, std::move(text), line_at(at)});
  }

  // Counted on from the last position asked (positions mostly grow): counting from the start
  // each time made a template of 100,000 tags take minutes to lex.
  int line_at(size_t pos) {
    pos = std::min(pos, src_.size());
    if (pos < line_pos_) {
      line_pos_ = 0;
      line_ = 1;
    }
    for (; line_pos_ < pos; ++line_pos_) line_ += src_[line_pos_] == '\n';
    return line_;
  }

  [[noreturn]] void fail(int line, const std::string& what) const {
    raise(Err::ChatTemplateInvalid, name_ + " line " + std::to_string(line) + ": " + what);
  }

  // Tokens inside {{ ... }} or {% ... %}; returns the position after the closing delimiter.
  size_t lex_tag(char kind, size_t pos, size_t tag, bool& strip_next) {
    const bool block = kind == '%';
    const int line = line_at(tag);
    tokens_.push_back({block ? Token::BlockBegin : Token::VarBegin, "", line});
    const char closer = block ? '%' : '}';
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size())
        fail(line, block ? "a {% tag is not closed" : "a {{ tag is not closed");
      const char c = src_[pos];
      const int here = line_at(pos);
      // Closing delimiter, possibly with '-' or '+'.
      if ((c == '-' || c == '+') && pos + 2 < src_.size() + 0 && src_[pos + 1] == closer &&
          src_[pos + 2] == '}') {
        strip_next = c == '-';
        pos += 3;
        break;
      }
      if (c == closer && pos + 1 < src_.size() && src_[pos + 1] == '}') {
        pos += 2;
        if (block) pos = trim_newline(pos);
        break;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
          ++e;
        tokens_.push_back({Token::Name, src_.substr(pos, e - pos), here});
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = pos;
        while (e < src_.size() &&
               (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
          ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' &&
            std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          is_float = true;
          ++e;
          while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {  // 1e3, 2.5E-4
          size_t x = e + 1;
          if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
          if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
            is_float = true;
            e = x;
            while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          }
        }
        std::string num;
        for (size_t i = pos; i < e; ++i)
          if (src_[i] != '_') num += src_[i];
        tokens_.push_back({is_float ? Token::Float : Token::Int, num, here});
        pos = e;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos, here);
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[",
                                           "]",  "{",  "}",  ".",  ",",  ":",  "|", "~", "+",
                                           "-",  "*",  "/",  "%",  "=",  "<",  ">"};
        bool found = false;
        for (const char* op : kOps) {
          const std::string_view o(op);
          if (src_.compare(pos, o.size(), o) == 0) {
            tokens_.push_back({Token::Op, std::string(o), here});
            pos += o.size();
            found = true;
            break;
          }
        }
        if (!found) fail(here, std::string("unexpected character '") + c + "'");
      }
    }
    tokens_.push_back({block ? Token::BlockEnd : Token::VarEnd, "", line});
    return pos;
  }

  // A Python string literal with the common escapes.
  size_t lex_string(size_t pos, int line) {
    const char q = src_[pos++];
    std::string out;
    while (true) {
      if (pos >= src_.size()) fail(line, "a string is not closed");
      const char c = src_[pos++];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= src_.size()) fail(line, "a string is not closed");
      const char e = src_[pos++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;
        case 'u': {
          uint32_t cp = 0;
          const char* hex = src_.data() + pos;
          if (pos + 4 > src_.size() || std::from_chars(hex, hex + 4, cp, 16).ptr != hex + 4)
            fail(line, "a \\u escape needs four hex digits");
          // A lone surrogate is no character: Python cannot encode it either.
          if (cp >= 0xD800 && cp <= 0xDFFF) fail(line, "a \\u escape names a surrogate");
          pos += 4;
          append_utf8(out, cp);
          break;
        }
        default:
          out += '\\', out += e;  // Python keeps unknown escapes as written
      }
    }
    tokens_.push_back({Token::String, std::move(out), line});
    return pos;
  }

  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string src_;
  const std::string& name_;
  std::vector<Token> tokens_;
  size_t line_pos_ = 0;  // line_at's cursor
  int line_ = 1;
};

// Jinja reads the source with newlines normalised and without one trailing newline.
std::string normalise(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& name) {
  return Lexer(normalise(source), name).run();
}

}  // namespace qmpi::jinja
