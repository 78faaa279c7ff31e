#include "text/jinja_template.h"

#include <charconv>
#include <cmath>

#include "core/errors.h"
#include "text/jinja_arith.h"
#include "text/jinja_builtins.h"
#include "text/jinja_lexer.h"
#include "text/jinja_parser.h"

namespace qmpi::jinja {
namespace {

using std::string;

bool is_int(const Value& v) {
  return !v.undefined && !v.ns && (v.json.is_number_integer() || v.json.is_number_unsigned());
}
bool is_num(const Value& v) {
  return !v.undefined && !v.ns && v.json.is_number();
}

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  Renderer(const string& name, const Limits& limits, const std::map<string, Value>& globals)
      : name_(name), limits_(limits) {
    scopes_.push_back(globals);
  }

  Rendered run(const Body& body) {
    exec(body);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(int line, const string& what) const {
    raise(Err::ChatTemplateFailed, name_ + " line " + std::to_string(line) + ": " + what);
  }

  // `n` steps of work (limits_.steps); every budget failure names its limit and how to raise it.
  void charge(int line, int64_t n = 1) {
    steps_ += n;
    if (steps_ > limits_.steps)
      fail(line, "the template ran past its " + std::to_string(limits_.steps) +
                     " steps (--chat-template-limits steps=N raises the limit)");
  }
  void check_string(int line, size_t bytes) const {
    if (bytes > limits_.output_bytes)
      fail(line, "the template built a string of more than " +
                     std::to_string(limits_.output_bytes) +
                     " bytes (--chat-template-limits output=SIZE raises the limit)");
  }
  void check_output(int line) const {
    if (out_.text.size() > limits_.output_bytes)
      fail(line, "the rendered output passed " + std::to_string(limits_.output_bytes) +
                     " bytes (--chat-template-limits output=SIZE raises the limit)");
  }
  // Charges a step per item of `j`, the cost of copying it, and fails when it nests more than
  // `room` levels deep: printing and copying a value recurse as deep as it nests.
  void charge_tree(const Json& j, int line, int room) {
    if (room < 0)
      fail(line, "lists and mappings nest deeper than " + std::to_string(limits_.render_depth) +
                     " levels (--chat-template-limits render-depth=N raises the limit)");
    charge(line);
    if (j.is_array() || j.is_object())
      for (const Json& x : j) charge_tree(x, line, room - 1);
  }

  const Value* find(const string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return &f->second;
    return nullptr;
  }
  Value lookup(const string& name) const {
    const Value* v = find(name);
    return v ? *v : Value::make_undefined();
  }

  void emit(int line, const Value& v) {
    if (v.is_string()) {
      const size_t off = out_.text.size();
      out_.text += v.str();
      for (const Span& s : v.plain) add_plain({s.begin + off, s.end + off});
    } else {
      const string s = to_text(v);
      const size_t off = out_.text.size();
      out_.text += s;
      if (v.tainted() && !s.empty()) add_plain({off, off + s.size()});
    }
    check_output(line);
  }
  void add_plain(Span s) {
    if (!out_.plain.empty() && out_.plain.back().end == s.begin)
      out_.plain.back().end = s.end;
    else
      out_.plain.push_back(s);
  }

  Flow exec(const Body& body) {
    for (const auto& s : body) {
      const Flow f = exec(*s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s) {
    charge(s.line);
    switch (s.kind) {
      case Stmt::Text:
        out_.text += s.text;
        check_output(s.line);
        return Flow::Normal;
      case Stmt::Output:
        emit(s.line, eval(*s.expr));
        return Flow::Normal;
      case Stmt::If:
        for (const auto& [cond, body] : s.branches)
          if (truthy(eval(*cond))) return exec(body);
        return exec(s.else_body);
      case Stmt::For:
        return exec_for(s);
      case Stmt::Set: {
        Value v = eval(*s.expr);
        if (s.attr.empty()) {
          scopes_.back()[s.targets[0]] = std::move(v);
          return Flow::Normal;
        }
        const Value target = lookup(s.targets[0]);
        if (!target.ns)
          fail(s.line, "can only set attributes of a namespace() ('" + s.targets[0] + "' is " +
                           type_name(target) + ")");
        (*target.ns)[s.attr] = std::move(v);
        return Flow::Normal;
      }
      case Stmt::Break:
        return Flow::Break;
      case Stmt::Continue:
        return Flow::Continue;
    }
    return Flow::Normal;
  }

  // One more loop iteration of the render's limits_.loop_iterations.
  void count_iteration(int line, int64_t n = 1) {
    iterations_ += n;
    if (iterations_ > limits_.loop_iterations)
      fail(line, "the template ran more than " + std::to_string(limits_.loop_iterations) +
                     " loop iterations (--chat-template-limits loop=N raises the limit)");
    charge(line);
  }

  Flow exec_for(const Stmt& s) {
    bool tainted;
    std::vector<Value> items;
    {
      Value held;
      const Value& seq = operand(*s.expr, held);  // not kept: the loop's scopes move it
      tainted = seq.tainted();
      try {
        // A string's characters become one value each: a 64 MiB string would make 64 million
        // before the first iteration counted, so its length is checked against the budget.
        if (seq.is_string() && int64_t(length(seq)) > limits_.loop_iterations - iterations_)
          count_iteration(s.line, limits_.loop_iterations);
        items = iterate(seq);
      } catch (const EvalError& e) {
        fail(s.line, e.what());
      }
    }
    // Each iteration runs in its own scope: `set` inside a loop does not leak out of it.
    auto bind = [&](std::map<string, Value>& scope, const Value& item) {
      if (s.targets.size() == 1) {
        scope[s.targets[0]] = item;
        return;
      }
      const std::vector<Value> parts = iterate(item);
      if (parts.size() != s.targets.size())
        fail(s.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                         std::to_string(s.targets.size()) + " loop variables");
      for (size_t i = 0; i < parts.size(); ++i) scope[s.targets[i]] = parts[i];
    };
    if (s.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        count_iteration(s.line);
        scopes_.emplace_back();
        bind(scopes_.back(), item);
        const bool keep = truthy(eval(*s.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const size_t n = items.size();
    for (size_t i = 0; i < n; ++i) {
      count_iteration(s.line);
      scopes_.emplace_back();
      bind(scopes_.back(), items[i]);
      Json loop = {{"index0", i},       {"index", i + 1},  {"revindex0", n - 1 - i},
                   {"revindex", n - i}, {"first", i == 0}, {"last", i + 1 == n},
                   {"length", n}};
      Value lv = Value::literal(std::move(loop));
      if (i > 0) lv.json["previtem"] = items[i - 1].json;
      if (i + 1 < n) lv.json["nextitem"] = items[i + 1].json;
      lv.from_data = tainted;
      scopes_.back()["loop"] = std::move(lv);
      const Flow f = exec(s.body);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    if (n == 0) return exec(s.else_body);
    return Flow::Normal;
  }

  Args eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t i = first; i < e.items.size(); ++i) a.pos.push_back(eval(*e.items[i]));
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x));
    a.steps_left = limits_.steps - steps_;
    return a;
  }

  Value eval(const Expr& e) {
    charge(e.line);
    Value v;
    try {
      v = eval_inner(e);
    } catch (const EvalError& err) {
      fail(e.line, err.what());
    }
    // What was built or copied costs its size: 64 bytes of a string or one item of a list.
    if (v.is_string()) {
      check_string(e.line, v.str().size());
      charge(e.line, int64_t(v.str().size() / 64));
    } else if (!v.undefined && !v.ns && (v.json.is_array() || v.json.is_object())) {
      charge(e.line, int64_t(v.json.size()));
    }
    return v;
  }

  // `e`'s value without copying it when it is a variable: `messages|length` or `messages[i]`
  // in a loop over the messages would otherwise copy the whole conversation each time.
  const Value& operand(const Expr& e, Value& held) {
    if (e.kind == Expr::Name) {
      charge(e.line);
      if (const Value* v = find(e.name)) return *v;
    }
    held = eval(e);
    return held;
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Literal:
        return e.value;
      case Expr::Name: {
        Value v = lookup(e.name);
        if (!v.ns) charge_tree(v.json, e.line, std::numeric_limits<int>::max());
        return v;
      }
      case Expr::List: {
        Value r = Value::literal(Json::array());
        for (const auto& x : e.items) {
          Value v = eval(*x);
          charge_tree(v.json, e.line, limits_.render_depth - 1);
          r.from_data = r.from_data || v.tainted();
          r.json.push_back(v.ns ? Json("<Namespace>") : v.json);
        }
        return r;
      }
      case Expr::Dict: {
        Value r = Value::literal(Json::object());
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          Value k = eval(*e.items[i]);
          Value v = eval(*e.items[i + 1]);
          if (!k.is_string()) fail(e.line, "dictionary keys must be strings here");
          charge_tree(v.json, e.line, limits_.render_depth - 1);
          r.from_data = r.from_data || k.tainted() || v.tainted();
          r.json[k.str()] = v.json;
        }
        return r;
      }
      case Expr::Attr: {
        Value held;
        const Value& base = operand(*e.items[0], held);
        if (base.undefined) fail(e.line, "cannot read ." + e.name + " of an undefined value");
        int64_t i = 0;  // x.0 on a list: the parser checked that digits fit in 64 bits
        if (!base.ns && base.json.is_array() &&
            std::from_chars(e.name.data(), e.name.data() + e.name.size(), i).ec == std::errc())
          return index(base, Value::literal(Json(i)));
        return index(base, Value::literal(Json(e.name)));
      }
      case Expr::Item: {
        Value held;
        const Value& base = operand(*e.items[0], held);
        const Value key = eval(*e.items[1]);
        if (base.undefined) fail(e.line, "cannot take an item of an undefined value");
        return index(base, key);
      }
      case Expr::Slice: {
        Value held;
        const Value& base = operand(*e.items[0], held);
        Value parts[3];
        const Value* p[3] = {nullptr, nullptr, nullptr};
        for (int i = 0; i < 3; ++i)
          if (e.items[1 + i]) {
            parts[i] = eval(*e.items[1 + i]);
            p[i] = &parts[i];
          }
        return slice(base, p[0], p[1], p[2]);
      }
      case Expr::Call:
        return eval_call(e);
      case Expr::Filter: {
        Value held;
        const Value& v = operand(*e.items[0], held);
        return apply_filter(e.name, v, eval_args(e, 1));
      }
      case Expr::Test: {
        Value held;
        const Value& v = operand(*e.items[0], held);
        return Value::literal(Json(apply_test(e.name, v, eval_args(e, 1)) != e.negate));
      }
      case Expr::Unary: {
        const Value v = eval(*e.items[0]);
        if (e.name == "not") return Value::literal(Json(!truthy(v)));
        if (!is_num(v)) fail(e.line, "unary " + e.name + " needs a number, got " + type_name(v));
        if (e.name == "+") return v;
        if (is_int(v)) return int_result(e.line, int_neg(v.json.get<int64_t>()));
        return Value::literal(Json(-v.json.get<double>()));
      }
      case Expr::And: {
        Value a = eval(*e.items[0]);
        return truthy(a) ? eval(*e.items[1]) : a;
      }
      case Expr::Or: {
        Value a = eval(*e.items[0]);
        return truthy(a) ? a : eval(*e.items[1]);
      }
      case Expr::Cond: {
        if (truthy(eval(*e.items[1]))) return eval(*e.items[0]);
        return e.items[2] ? eval(*e.items[2]) : Value::make_undefined();
      }
      case Expr::Binary:
        return eval_binary(e);
      case Expr::Compare:
        return eval_compare(e);
    }
    fail(e.line, "unknown expression");
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.items[0];
    if (callee.kind == Expr::Attr) {
      Value held;
      const Value& obj = operand(*callee.items[0], held);
      if (obj.undefined) fail(e.line, "cannot call ." + callee.name + "() on an undefined value");
      if (auto r = call_method(obj, callee.name, eval_args(e, 1))) return *r;
      fail(e.line, type_name(obj) + " has no method " + callee.name + "()");
    }
    if (callee.kind != Expr::Name) fail(e.line, "this expression cannot be called");
    const string& fn = callee.name;
    Args a = eval_args(e, 1);
    if (fn == "raise_exception") {
      const string msg = a.pos.empty() ? string("(no message)") : to_text(a.pos[0]);
      raise(Err::ChatTemplateFailed, "the chat template refused this conversation (" + name_ +
                                         " line " + std::to_string(e.line) + "): " + msg);
    }
    if (fn == "namespace" || fn == "dict") {
      Value r;
      if (fn == "namespace")
        r.ns = std::make_shared<Namespace>();
      else
        r = Value::literal(Json::object());
      for (const Value& p : a.pos) {  // namespace({...}) copies a mapping
        if (p.undefined || !p.json.is_object())
          fail(e.line, fn + "() takes a mapping or key=value");
        charge_tree(p.json, e.line, limits_.render_depth);
        for (const auto& [k, j] : p.json.items()) {
          if (r.ns)
            (*r.ns)[k] = p.tainted() ? Value::data(j) : Value::literal(j);
          else
            r.json[k] = j;
        }
      }
      for (auto& [k, v] : a.kw) {
        if (!v.ns) charge_tree(v.json, e.line, limits_.render_depth - 1);
        if (r.ns)
          (*r.ns)[k] = v;
        else {
          r.from_data = r.from_data || v.tainted();
          r.json[k] = v.json;
        }
      }
      return r;
    }
    if (fn == "range") {
      if (a.pos.empty() || a.pos.size() > 3) fail(e.line, "range() takes 1 to 3 integers");
      int64_t start = 0, stop, step = 1;
      auto as_int = [&](const Value& v) {
        if (!is_int(v)) fail(e.line, "range() takes integers, got " + type_name(v));
        return v.json.get<int64_t>();
      };
      if (a.pos.size() == 1)
        stop = as_int(a.pos[0]);
      else {
        start = as_int(a.pos[0]);
        stop = as_int(a.pos[1]);
        if (a.pos.size() == 3) step = as_int(a.pos[2]);
      }
      if (step == 0) fail(e.line, "range() step cannot be zero");
      Json out = Json::array();
      for (std::optional<int64_t> i = start; i && (step > 0 ? *i < stop : *i > stop);
           i = int_add(*i, step)) {  // past INT64_MAX: the range has ended
        out.push_back(*i);
        charge(e.line);
        if (out.size() > 1000000) fail(e.line, "range() is too long");
      }
      return Value::literal(std::move(out));
    }
    const Value v = lookup(fn);
    fail(e.line, v.undefined ? "'" + fn + "' is undefined" : "'" + fn + "' is not callable");
  }

  // a op b for one link of a comparison chain.
  bool compare(int line, const string& op, const Value& a, const Value& b) {
    if (op == "in" || op == "not in") return contains(b, a) == (op == "in");
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (a.undefined || b.undefined) fail(line, "'" + op + "' on an undefined value");
    // Python orders booleans as the integers 0 and 1.
    auto num = [](const Value& v) {
      return v.json.is_boolean() ? double(v.json.get<bool>()) : v.json.get<double>();
    };
    const bool na = is_num(a) || (!a.ns && a.json.is_boolean());
    const bool nb = is_num(b) || (!b.ns && b.json.is_boolean());
    int c;
    if (na && nb) {
      const double x = num(a), y = num(b);
      c = x < y ? -1 : x > y;
    } else if (a.is_string() && b.is_string()) {
      c = a.str() < b.str() ? -1 : a.str() > b.str();
    } else {
      fail(line, "cannot compare " + type_name(a) + " and " + type_name(b) + " with " + op);
    }
    return op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
  }

  Value eval_compare(const Expr& e) {
    Value left = eval(*e.items[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.items[i + 1]);
      if (!compare(e.line, e.ops[i], left, right)) return Value::literal(Json(false));
      left = std::move(right);
    }
    return Value::literal(Json(true));
  }

  Value eval_binary(const Expr& e) {
    const string& op = e.name;
    const Value a = eval(*e.items[0]);
    const Value b = eval(*e.items[1]);
    if (op == "~") {
      const Value sa = a.is_string() ? a : derived_string(to_text(a), {&a});
      const Value sb = b.is_string() ? b : derived_string(to_text(b), {&b});
      return concat(sa, sb);
    }
    if (a.undefined || b.undefined) fail(e.line, "'" + op + "' on an undefined value");
    if (op == "+" && a.is_string() && b.is_string()) return concat(a, b);
    if (op == "+" && a.json.is_array() && b.json.is_array() && !a.ns && !b.ns) {
      charge_tree(a.json, e.line, limits_.render_depth);
      charge_tree(b.json, e.line, limits_.render_depth);
      Json out = a.json;
      for (const Json& x : b.json) out.push_back(x);
      return derived(std::move(out), {&a, &b});
    }
    if (op == "*" && (a.is_string() || b.is_string()) && (is_int(a) || is_int(b))) {
      const Value& s = a.is_string() ? a : b;
      const int64_t n = (is_int(a) ? a : b).json.get<int64_t>();
      // Refused before building: 'ab' * 2**62 would never finish.
      if (n > 0 && s.str().size() > limits_.output_bytes / uint64_t(n))
        check_string(e.line, limits_.output_bytes + 1);
      string out;
      for (int64_t i = 0; i < n; ++i) out += s.str();
      return derived_string(std::move(out), {&s});
    }
    if (!is_num(a) || !is_num(b))
      fail(e.line,
           "unsupported operand types for " + op + ": " + type_name(a) + " and " + type_name(b));
    if (is_int(a) && is_int(b) && op != "/") {
      const int64_t x = a.json.get<int64_t>(), y = b.json.get<int64_t>();
      if ((op == "//" || op == "%") && y == 0) fail(e.line, "division by zero");
      if (op == "+") return int_result(e.line, int_add(x, y));
      if (op == "-") return int_result(e.line, int_sub(x, y));
      if (op == "*") return int_result(e.line, int_mul(x, y));
      if (op == "//") return int_result(e.line, int_floordiv(x, y));
      if (op == "%") return Value::literal(Json(int_mod(x, y)));
      if (op == "**" && y >= 0) return int_result(e.line, int_pow(x, y));
    }
    const double x = a.json.get<double>(), y = b.json.get<double>();
    if ((op == "/" || op == "//" || op == "%") && y == 0) fail(e.line, "division by zero");
    if (op == "+") return Value::literal(Json(x + y));
    if (op == "-") return Value::literal(Json(x - y));
    if (op == "*") return Value::literal(Json(x * y));
    if (op == "/") return Value::literal(Json(x / y));
    if (op == "//") return Value::literal(Json(std::floor(x / y)));
    if (op == "%") return Value::literal(Json(x - y * std::floor(x / y)));
    if (op == "**") return Value::literal(Json(std::pow(x, y)));
    fail(e.line, "unknown operator " + op);
  }

  Value int_result(int line, std::optional<int64_t> r) const {
    if (!r) fail(line, "integer overflow (qmpi's template integers are 64-bit)");
    return Value::literal(Json(*r));
  }

  const string& name_;
  const Limits& limits_;
  std::vector<std::map<string, Value>> scopes_;
  Rendered out_;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace

Template::Template(std::string_view source, std::string name, const Limits& limits)
    : name_(std::move(name)), limits_(limits), body_(parse(lex(source, name_), name_, limits_)) {}
Template::Template(Template&&) noexcept = default;
Template::~Template() = default;

Rendered Template::render(const std::map<string, Value>& globals) const {
  return Renderer(name_, limits_, globals).run(body_);
}

}  // namespace qmpi::jinja
