#include "text/jinja_parser.h"

#include <charconv>
#include <cmath>

#include "core/errors.h"

namespace qmpi::jinja {
namespace {

std::unique_ptr<Stmt> new_stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name, const Limits& limits)
      : t_(tokens), name_(name), limits_(limits) {}

  Body parse_all() {
    std::string stop;
    Body body = parse_body({}, stop);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Op && peek(ahead).value == op;
  }
  bool is_name(const char* n, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Name && peek(ahead).value == n;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    raise(Err::ChatTemplateInvalid, name_ + " line " + std::to_string(peek().line) + ": " + what);
  }
  [[noreturn]] void too_deep() const {
    fail("the template nests deeper than " + std::to_string(limits_.parse_depth) +
         " levels of blocks and expressions (--chat-template-limits depth=N raises it)");
  }

  // One level of the parser's recursion: bounded so that 50,000 '(' cannot overflow the stack.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > p_.limits_.parse_depth) p_.too_deep();
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  // A finished expression node: its height from its children's, which the loops that build
  // chains (a + b + c..., x.a.b..., filters) grow without recursing.
  ExprPtr sealed(ExprPtr e) {
    int h = 0;
    for (const auto& x : e->items)
      if (x) h = std::max(h, x->height);
    for (const auto& kv : e->kwargs) h = std::max(h, kv.second->height);
    e->height = h + 1;
    if (e->height > limits_.parse_depth) too_deep();
    return e;
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Token::End:
        return "the end of the template";
      case Token::BlockEnd:
        return "%}";
      case Token::VarEnd:
        return "}}";
      case Token::String:
        return "a string";
      default:
        return "'" + t.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail(std::string("expected '") + op + "', found " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().kind != Token::Name) fail("expected a name, found " + describe(peek()));
    return next().value;
  }
  void expect(Token::Kind kind, const char* what) {
    if (peek().kind != kind) fail(std::string("expected ") + what + ", found " + describe(peek()));
    ++pos_;
  }

  // Statements up to one of `stops` (a block keyword, returned in `stop`) or the end.
  Body parse_body(std::initializer_list<const char*> stops, std::string& stop) {
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.kind == Token::End) {
        if (stops.size()) fail(std::string("missing {% ") + *stops.begin() + " %}");
        return body;
      }
      if (tok.kind == Token::Text) {
        auto s = new_stmt(Stmt::Text, tok.line);
        s->text = tok.value;
        body.push_back(std::move(s));
        ++pos_;
        continue;
      }
      if (tok.kind == Token::VarBegin) {
        ++pos_;
        auto s = new_stmt(Stmt::Output, tok.line);
        s->expr = parse_expr();
        expect(Token::VarEnd, "}}");
        body.push_back(std::move(s));
        continue;
      }
      expect(Token::BlockBegin, "{%");
      const std::string kw = expect_name();
      for (const char* st : stops)
        if (kw == st) {
          stop = kw;
          return body;
        }
      if (kw == "generation" || kw == "endgeneration") {  // transformers' assistant-mask marker
        expect(Token::BlockEnd, "%}");
        continue;
      }
      body.push_back(parse_statement(kw, tok.line));
    }
  }

  std::unique_ptr<Stmt> parse_statement(const std::string& kw, int line) {
    Nest nest(*this);
    if (kw == "if") return parse_if(line);
    if (kw == "for") return parse_for(line);
    if (kw == "set") return parse_set(line);
    if (kw == "break" || kw == "continue") {
      expect(Token::BlockEnd, "%}");
      return new_stmt(kw == "break" ? Stmt::Break : Stmt::Continue, line);
    }
    fail("unsupported statement '" + kw +
         "' (qmpi's template engine knows if, for, set, "
         "break and continue)");
  }

  std::unique_ptr<Stmt> parse_if(int line) {
    auto s = new_stmt(Stmt::If, line);
    ExprPtr cond = parse_expr();
    while (true) {
      expect(Token::BlockEnd, "%}");
      std::string stop;
      Body body = parse_body({"endif", "elif", "else"}, stop);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (stop == "elif") {
        cond = parse_expr();
        continue;
      }
      if (stop == "else") {
        expect(Token::BlockEnd, "%}");
        s->else_body = parse_body({"endif"}, stop);
      }
      expect(Token::BlockEnd, "%}");
      return s;
    }
  }

  std::unique_ptr<Stmt> parse_for(int line) {
    auto s = new_stmt(Stmt::For, line);
    s->targets.push_back(expect_name());
    while (accept_op(",")) s->targets.push_back(expect_name());
    if (!accept_name("in")) fail("expected 'in' in the for statement");
    s->expr = parse_or_test(/*allow_cond=*/false);
    if (accept_name("if")) s->filter = parse_or_test(false);
    if (accept_name("recursive")) fail("recursive loops are not supported");
    expect(Token::BlockEnd, "%}");
    std::string stop;
    s->body = parse_body({"endfor", "else"}, stop);
    if (stop == "else") {
      expect(Token::BlockEnd, "%}");
      s->else_body = parse_body({"endfor"}, stop);
    }
    expect(Token::BlockEnd, "%}");
    return s;
  }

  std::unique_ptr<Stmt> parse_set(int line) {
    auto s = new_stmt(Stmt::Set, line);
    s->targets.push_back(expect_name());
    if (accept_op(".")) s->attr = expect_name();
    if (!is_op("=")) fail("expected '=' in the set statement (block set is not supported)");
    ++pos_;
    s->expr = parse_expr();
    expect(Token::BlockEnd, "%}");
    return s;
  }

  ExprPtr make(Expr::Kind kind, int line, std::string name = {}) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }

  ExprPtr parse_expr() { return parse_or_test(true); }

  ExprPtr parse_or_test(bool allow_cond) {
    Nest nest(*this);
    ExprPtr e = parse_or();
    if (!allow_cond) return e;
    while (is_name("if")) {
      const int line = next().line;
      auto c = make(Expr::Cond, line);
      c->items.push_back(std::move(e));
      c->items.push_back(parse_or());
      c->items.push_back(accept_name("else") ? parse_or_test(true) : nullptr);
      e = sealed(std::move(c));
    }
    return e;
  }

  ExprPtr binary(Expr::Kind kind, int line, std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(kind, line, std::move(op));
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return sealed(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      e = binary(Expr::Or, line, "or", std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      e = binary(Expr::And, line, "and", std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this);
      const int line = next().line;
      auto e = make(Expr::Unary, line, "not");
      e->items.push_back(parse_not());
      return sealed(std::move(e));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr chain;
    while (true) {
      const int line = peek().line;
      std::string op;
      if (peek().kind == Token::Op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")))
        op = next().value;
      else if (accept_name("in"))
        op = "in";
      else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        op = "not in";
      } else
        return chain ? sealed(std::move(chain)) : std::move(first);
      if (!chain) {
        chain = make(Expr::Compare, line);
        chain->items.push_back(std::move(first));
      }
      chain->ops.push_back(op);
      chain->items.push_back(parse_math1());
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      e = binary(Expr::Binary, t.line, t.value, std::move(e), parse_concat());
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const int line = next().line;
      e = binary(Expr::Binary, line, "~", std::move(e), parse_math2());
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(Expr::Binary, t.line, t.value, std::move(e), parse_pow());
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary();
    while (is_op("**")) {
      const int line = next().line;
      e = binary(Expr::Binary, line, "**", std::move(e), parse_unary());
    }
    return e;
  }
  ExprPtr parse_unary() {
    if (is_op("-") || is_op("+")) {
      Nest nest(*this);
      const Token& t = next();
      auto e = make(Expr::Unary, t.line, t.value);
      e->items.push_back(parse_unary());
      return sealed(std::move(e));
    }
    return parse_postfix_and_filters(parse_primary());
  }

  ExprPtr parse_primary() {
    const Token& t = next();
    switch (t.kind) {
      case Token::Name: {
        if (t.value == "true" || t.value == "True") return literal(Json(true), t.line);
        if (t.value == "false" || t.value == "False") return literal(Json(false), t.line);
        if (t.value == "none" || t.value == "None") return literal(Json(nullptr), t.line);
        return make(Expr::Name, t.line, t.value);
      }
      case Token::String: {
        std::string s = t.value;
        while (peek().kind == Token::String) s += next().value;  // "a" "b" is "ab"
        return literal(Json(s), t.line);
      }
      case Token::Int:
        return literal(Json(int_literal(t.value)), t.line);
      case Token::Float: {
        const double d = std::strtod(t.value.c_str(), nullptr);
        if (!std::isfinite(d)) fail("the number literal " + t.value + " is out of range");
        return literal(Json(d), t.line);
      }
      case Token::Op:
        if (t.value == "(") {
          ExprPtr e = parse_expr();
          if (is_op(",")) {  // a tuple: a list is close enough for templates
            auto l = make(Expr::List, t.line);
            l->items.push_back(std::move(e));
            while (accept_op(",") && !is_op(")")) l->items.push_back(parse_expr());
            e = std::move(l);
          }
          expect_op(")");
          return e;
        }
        if (t.value == "[") {
          auto l = make(Expr::List, t.line);
          while (!is_op("]")) {
            l->items.push_back(parse_expr());
            if (!accept_op(",")) break;
          }
          expect_op("]");
          return sealed(std::move(l));
        }
        if (t.value == "{") {
          auto d = make(Expr::Dict, t.line);
          while (!is_op("}")) {
            d->items.push_back(parse_expr());
            expect_op(":");
            d->items.push_back(parse_expr());
            if (!accept_op(",")) break;
          }
          expect_op("}");
          return sealed(std::move(d));
        }
        break;
      default:
        break;
    }
    --pos_;
    fail("expected an expression, found " + describe(peek()));
  }

  // Python's integers are unbounded; the template's are 64-bit.
  int64_t int_literal(const std::string& text) {
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size())
      fail("the integer literal " + text.substr(0, 40) +
           " does not fit in 64 bits (qmpi's template integers are 64-bit)");
    return n;
  }

  ExprPtr literal(Json j, int line) {
    auto e = make(Expr::Literal, line);
    e->value = Value::literal(std::move(j));
    return e;
  }

  void parse_args(Expr& call) {
    // After '(': positional and keyword arguments up to ')'.
    while (!is_op(")")) {
      if (peek().kind == Token::Name && is_op("=", 1)) {
        std::string key = next().value;
        ++pos_;
        call.kwargs.emplace_back(std::move(key), parse_expr());
      } else {
        call.items.push_back(parse_expr());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_postfix_and_filters(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (accept_op(".")) {
        auto a = make(
            Expr::Attr, line,
            peek().kind == Token::Int ? std::to_string(int_literal(next().value)) : expect_name());
        a->items.push_back(std::move(e));
        e = sealed(std::move(a));
      } else if (accept_op("[")) {
        e = sealed(parse_subscript(std::move(e), line));
      } else if (accept_op("(")) {
        auto c = make(Expr::Call, line);
        c->items.push_back(std::move(e));
        parse_args(*c);
        e = sealed(std::move(c));
      } else if (accept_op("|")) {
        auto f = make(Expr::Filter, line, expect_name());
        while (accept_op(".")) f->name += "." + expect_name();
        f->items.push_back(std::move(e));
        if (accept_op("(")) parse_args(*f);
        e = sealed(std::move(f));
      } else if (accept_name("is")) {
        auto t = make(Expr::Test, line);
        t->negate = accept_name("not");
        // none/true/false are test names here, not literals.
        t->name = expect_name();
        t->items.push_back(std::move(e));
        if (accept_op("(")) parse_args(*t);
        e = sealed(std::move(t));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr base, int line) {
    ExprPtr parts[3];
    int n = 0;
    bool is_slice = false;
    while (true) {
      if (!is_op(":") && !is_op("]")) parts[n] = parse_expr();
      if (accept_op(":")) {
        is_slice = true;
        if (++n > 2) fail("a slice takes at most three parts");
        continue;
      }
      break;
    }
    expect_op("]");
    auto e = make(is_slice ? Expr::Slice : Expr::Item, line);
    e->items.push_back(std::move(base));
    if (is_slice)
      for (auto& p : parts) e->items.push_back(std::move(p));
    else
      e->items.push_back(std::move(parts[0]));
    return e;
  }

  const std::vector<Token>& t_;
  const std::string& name_;
  const Limits& limits_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& name, const Limits& limits) {
  return Parser(tokens, name, limits).parse_all();
}

}  // namespace qmpi::jinja
