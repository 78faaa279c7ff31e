#include "text/jinja_builtins.h"

#include <algorithm>
#include <cmath>

#include "text/jinja_arith.h"
#include "text/utf8.h"

namespace qmpi::jinja {
namespace {

using std::string;

// tojson's widest indent: far beyond any template's, far below a crash.
constexpr int64_t kMaxIndent = 1024;
// The most an indented tojson may write, checked before writing: indentation repeats per level
// and per item, so a list the step budget allows can indent to gigabytes. The renderer's own
// output limit (jinja_limits.h) then applies to what is written.
constexpr size_t kMaxIndentedJson = size_t(256) << 20;

// A lower bound of json.dumps(j, indent)'s length, counted until it passes `cap`: every value
// starts a line indented by its depth.
size_t indented_size(const Json& j, size_t indent, size_t depth, size_t cap) {
  size_t n = 1 + depth * indent + (j.is_string() ? j.get_ref<const string&>().size() + 2 : 4);
  if (j.is_array() || j.is_object())
    for (const Json& x : j) {
      if (n > cap) break;
      n += indented_size(x, indent, depth + 1, cap - std::min(n, cap));
    }
  return n;
}

[[noreturn]] void fail(const string& what) {
  throw EvalError(what);
}

// An element taken out of `parent`: caller data stays caller data.
Value child(const Value& parent, const Json& j) {
  return parent.tainted() ? Value::data(j) : Value::literal(j);
}

std::u32string decode(const string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) out += utf8::decode(s, i);
  return out;
}
string encode(std::u32string_view s) {
  string out;
  for (char32_t c : s) utf8::append(out, c);
  return out;
}

// Python's str.isspace() set.
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

const string& need_string(const Value& v, const char* what) {
  if (!v.is_string()) fail(string(what) + " needs a string, got " + type_name(v));
  return v.str();
}

int64_t need_int(const Value& v, const char* what) {
  if (v.undefined || !(v.json.is_number_integer() || v.json.is_number_unsigned()))
    fail(string(what) + " needs an integer, got " + type_name(v));
  return v.json.get<int64_t>();
}

Value strip(const Value& v, const Value* chars, bool left, bool right) {
  const std::u32string s = decode(need_string(v, "strip"));
  std::u32string set;
  const bool ws = !chars || chars->json.is_null() || chars->undefined;
  if (!ws) set = decode(need_string(*chars, "strip's argument"));
  auto drop = [&](char32_t c) { return ws ? py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return derived_string(encode(std::u32string_view(s).substr(b, e - b)), {&v});
}

// Fails once a list being built holds more items than the render has steps left (Args).
void check_items(size_t n, int64_t steps_left, const char* what) {
  if (int64_t(n) > steps_left)
    fail(string(what) + ": more than " + std::to_string(steps_left) +
         " items, past the template's step budget (--chat-template-limits steps=N raises the "
         "limit)");
}

Value split(const Value& v, const Value* sep, const Value* maxsplit, int64_t steps_left) {
  const string& s = need_string(v, "split");
  int64_t left = maxsplit ? need_int(*maxsplit, "split's maxsplit") : -1;
  Json parts = Json::array();
  if (!sep || sep->json.is_null()) {
    // Python's split(): runs of whitespace separate, none at either end. Scanned in place (a
    // decoded copy would be four times the string).
    size_t next = 0;
    const auto space = [&](size_t at) {
      next = at;
      return py_space(utf8::decode(s, next));
    };
    size_t i = 0;
    while (true) {
      while (i < s.size() && space(i)) i = next;
      if (i == s.size()) break;
      check_items(parts.size() + 1, steps_left, "split");
      if (left == 0) {
        size_t end = i;  // the rest, without its trailing whitespace
        for (size_t k = i; k < s.size(); k = next)
          if (!space(k)) end = next;
        parts.push_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !space(j)) j = next;
      parts.push_back(s.substr(i, j - i));
      i = j;
      --left;
    }
  } else {
    const string& d = need_string(*sep, "split's separator");
    if (d.empty()) fail("split: empty separator");
    size_t from = 0;
    for (size_t at; left != 0 && (at = s.find(d, from)) != string::npos; --left) {
      check_items(parts.size() + 1, steps_left, "split");
      parts.push_back(s.substr(from, at - from));
      from = at + d.size();
    }
    check_items(parts.size() + 1, steps_left, "split");
    parts.push_back(s.substr(from));
  }
  return derived(std::move(parts), {&v});
}

Value replace(const Value& v, const Value& old_v, const Value& new_v, const Value* count) {
  const string& s = need_string(v, "replace");
  const string& o = need_string(old_v, "replace");
  const string& n = need_string(new_v, "replace");
  int64_t left = count ? need_int(*count, "replace's count") : -1;
  if (o.empty()) return v;
  string out;
  size_t from = 0;
  for (size_t at; left != 0 && (at = s.find(o, from)) != string::npos; --left) {
    out.append(s, from, at - from).append(n);
    from = at + o.size();
  }
  out.append(s, from);
  return derived_string(std::move(out), {&v, &new_v});
}

string ascii_case(string s, bool upper) {
  for (char& c : s)
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool affix(const Value& v, const Value& arg, bool prefix) {
  const string& s = need_string(v, prefix ? "startswith" : "endswith");
  auto one = [&](const string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (arg.json.is_array()) {
    for (const Json& a : arg.json)
      if (a.is_string() && one(a.get<string>())) return true;
    return false;
  }
  return one(need_string(arg, "startswith/endswith's argument"));
}

Value join(const Value& sep, const Value& list, const Value* attribute) {
  string out;
  bool tainted = sep.tainted() || list.tainted();
  bool first = true;
  for (const Value& item : iterate(list)) {
    if (!first) out += to_text(sep);
    first = false;
    const Value* x = &item;
    Value picked;
    if (attribute) {
      picked = index(item, *attribute);
      x = &picked;
    }
    out += to_text(*x);
  }
  Value r = Value::literal(out);
  if (tainted && !out.empty()) r.plain = {{0, out.size()}};
  return r;
}

int cmp_values(const Value& a, const Value& b) {
  if (a.json.is_number() && b.json.is_number()) {
    const double x = a.json.get<double>(), y = b.json.get<double>();
    return x < y ? -1 : x > y;
  }
  if (a.json.is_string() && b.json.is_string())
    return a.str().compare(b.str()) < 0 ? -1 : a.str() != b.str();
  fail("cannot order " + type_name(a) + " and " + type_name(b));
}

}  // namespace

const Value* Args::get(size_t i, const char* name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return i < pos.size() ? &pos[i] : nullptr;
}

size_t length(const Value& v) {
  if (v.is_string()) {  // characters, counted without a decoded copy
    const string& s = v.str();
    size_t n = 0;
    for (size_t i = 0; i < s.size(); ++n) utf8::decode(s, i);
    return n;
  }
  if (!v.undefined && (v.json.is_array() || v.json.is_object())) return v.json.size();
  if (v.undefined) return 0;
  fail("object of type " + type_name(v) + " has no length");
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  if (v.undefined) return out;  // Jinja iterates an undefined value as empty
  if (v.json.is_array()) {
    for (const Json& j : v.json) out.push_back(child(v, j));
  } else if (v.json.is_object()) {
    for (const auto& [k, j] : v.json.items()) out.push_back(child(v, Json(k)));
  } else if (v.is_string()) {
    const std::u32string u = decode(v.str());
    for (char32_t c : u) out.push_back(derived_string(encode(std::u32string_view(&c, 1)), {&v}));
  } else {
    fail(type_name(v) + " is not iterable");
  }
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (a.undefined || b.undefined) return a.undefined && b.undefined;
  if (a.ns || b.ns) return a.ns == b.ns;
  if (a.json.is_boolean() != b.json.is_boolean()) {
    // Python: True == 1; keep that.
    if (a.json.is_number() || b.json.is_number())
      return (a.json.is_boolean() ? a.json.get<bool>() : a.json.get<double>()) ==
             (b.json.is_boolean() ? b.json.get<bool>() : b.json.get<double>());
    return false;
  }
  return a.json == b.json;
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string())
    return container.str().find(need_string(item, "'in' on a string")) != string::npos;
  if (container.undefined) fail("'in' needs a string, list or mapping, got undefined");
  if (container.json.is_array()) {
    for (const Json& j : container.json)
      if (equal(Value::literal(j), item)) return true;
    return false;
  }
  if (container.json.is_object()) return item.is_string() && container.json.contains(item.str());
  fail("'in' needs a string, list or mapping, got " + type_name(container));
}

Value concat(const Value& a, const Value& b) {
  Value r = Value::literal(a.str() + b.str());
  r.plain = a.plain;
  const size_t off = a.str().size();
  for (const Span& s : b.plain) {
    if (!r.plain.empty() && r.plain.back().end == s.begin + off)
      r.plain.back().end = s.end + off;
    else
      r.plain.push_back({s.begin + off, s.end + off});
  }
  return r;
}

Value index(const Value& v, const Value& key) {
  if (v.undefined) fail("cannot take an item of an undefined value");
  if (v.ns) {
    if (!key.is_string()) return Value::make_undefined();
    auto it = v.ns->find(key.str());
    return it == v.ns->end() ? Value::make_undefined() : it->second;
  }
  if (v.json.is_object()) {
    if (!key.is_string()) return Value::make_undefined();
    auto it = v.json.find(key.str());
    return it == v.json.end() ? Value::make_undefined() : child(v, *it);
  }
  if (v.json.is_array() || v.is_string()) {
    if (!(key.json.is_number_integer() || key.json.is_number_unsigned()) || key.undefined)
      return Value::make_undefined();
    int64_t i = key.json.get<int64_t>();
    if (v.json.is_array()) {
      const int64_t n = static_cast<int64_t>(v.json.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::make_undefined();
      return child(v, v.json[static_cast<size_t>(i)]);
    }
    const std::u32string u = decode(v.str());
    const int64_t n = static_cast<int64_t>(u.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::make_undefined();
    return derived_string(encode(std::u32string_view(u).substr(static_cast<size_t>(i), 1)), {&v});
  }
  return Value::make_undefined();
}

Value slice(const Value& v, const Value* start, const Value* stop, const Value* step) {
  auto opt = [](const Value* x) -> std::optional<int64_t> {
    if (!x || x->undefined || x->json.is_null()) return std::nullopt;
    return need_int(*x, "a slice");
  };
  const int64_t st = opt(step).value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  std::u32string u;
  const bool str = v.is_string();
  if (str)
    u = decode(v.str());
  else if (v.undefined || !v.json.is_array())
    fail("cannot slice " + type_name(v));
  const int64_t n = str ? static_cast<int64_t>(u.size()) : static_cast<int64_t>(v.json.size());
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> x, int64_t dflt) {
    if (!x) return dflt;
    int64_t i = *x < 0 ? *x + n : *x;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(opt(start), st > 0 ? 0 : n - 1);
  const int64_t e = clamp(opt(stop), st > 0 ? n : -1);
  std::vector<int64_t> picks;
  for (std::optional<int64_t> i = b; i && (st > 0 ? *i < e : *i > e); i = int_add(*i, st))
    picks.push_back(*i);
  if (str) {
    std::u32string out;
    for (int64_t i : picks) out += u[static_cast<size_t>(i)];
    return derived_string(encode(out), {&v});
  }
  Json out = Json::array();
  for (int64_t i : picks) out.push_back(v.json[static_cast<size_t>(i)]);
  return derived(std::move(out), {&v});
}

Value apply_filter(const string& name, const Value& v, const Args& a) {
  if (name == "tojson") {
    if (v.undefined) fail("tojson of an undefined value");
    const Value* indent = a.get(0, "indent");
    int n = -1;
    if (indent && !indent->json.is_null()) {
      const int64_t i = need_int(*indent, "tojson's indent");
      // Each nesting level repeats the indent: 2**31 spaces per line was a crash.
      if (i > kMaxIndent)
        fail("tojson's indent " + std::to_string(i) + " is above " + std::to_string(kMaxIndent));
      n = static_cast<int>(std::max<int64_t>(i, 0));  // json.dumps: a negative indent is 0
      if (indented_size(v.json, size_t(n), 0, kMaxIndentedJson) > kMaxIndentedJson)
        fail("tojson with indent " + std::to_string(n) + " would write more than " +
             std::to_string(kMaxIndentedJson) + " bytes");
    }
    return derived_string(py_json_dumps(v.json, n), {&v});
  }
  if (name == "trim") return strip(v, a.get(0, "chars"), true, true);
  if (name == "length" || name == "count") return Value::literal(Json(length(v)));
  if (name == "string") return derived_string(to_text(v), {&v});
  if (name == "lower" || name == "upper")
    return derived_string(ascii_case(need_string(v, name.c_str()), name == "upper"), {&v});
  if (name == "capitalize") {
    string s = ascii_case(need_string(v, "capitalize"), false);
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return derived_string(std::move(s), {&v});
  }
  if (name == "default" || name == "d") {
    const Value* b = a.get(1, "boolean");
    const bool use = b && truthy(*b) ? !truthy(v) : v.undefined;
    if (!use) return v;
    const Value* dflt = a.get(0, "default_value");
    return dflt ? *dflt : Value::literal(Json(""));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    return join(sep ? *sep : Value::literal(Json("")), v, a.get(1, "attribute"));
  }
  if (name == "items") {
    if (v.undefined || !v.json.is_object()) fail("items needs a mapping, got " + type_name(v));
    Json out = Json::array();
    for (const auto& [k, j] : v.json.items()) out.push_back(Json::array({k, j}));
    return derived(std::move(out), {&v});
  }
  if (name == "list") {
    const bool sized = v.is_string() || (!v.undefined && v.json.is_structured());
    if (sized) check_items(length(v), a.steps_left, "list");
    Json out = Json::array();
    for (const Value& x : iterate(v)) out.push_back(x.json);
    return derived(std::move(out), {&v});
  }
  if (name == "first" || name == "last") {
    const std::vector<Value> xs = iterate(v);
    if (xs.empty()) return Value::make_undefined();
    return name == "first" ? xs.front() : xs.back();
  }
  if (name == "reverse") {
    const Value back = Value::literal(Json(-1));
    return slice(v, nullptr, nullptr, &back);
  }
  if (name == "replace") {
    if (!a.get(0, "old") || !a.get(1, "new")) fail("replace needs two arguments");
    return replace(v, *a.get(0, "old"), *a.get(1, "new"), a.get(2, "count"));
  }
  if (name == "int") {
    if (v.json.is_number_integer()) return Value::literal(v.json);
    if (v.json.is_number()) {
      const double d = std::trunc(v.json.get<double>());
      // 2**63 is the first double past INT64_MAX; NaN fails both tests.
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        fail("int of " + to_text(v) + " does not fit in a 64-bit integer");
      return Value::literal(Json(static_cast<int64_t>(d)));
    }
    if (v.is_string()) try {
        return Value::literal(Json(std::stoll(v.str())));
      } catch (...) {
      }
    return Value::literal(Json(0));
  }
  if (name == "float") {
    if (v.json.is_number()) return Value::literal(Json(v.json.get<double>()));
    return Value::literal(Json(0.0));
  }
  if (name == "abs") {
    if (v.json.is_number_float()) return Value::literal(Json(std::fabs(v.json.get<double>())));
    const auto r = int_neg(need_int(v, "abs"));
    if (!r) fail("integer overflow in abs (qmpi's template integers are 64-bit)");
    return Value::literal(Json(std::max(*r, -*r)));
  }
  if (name == "safe") return v;
  if (name == "map") {
    const Value* attr = a.get(99, "attribute");
    Json out = Json::array();
    for (const Value& x : iterate(v)) {
      if (attr)
        out.push_back(index(x, *attr).json);
      else if (!a.pos.empty())
        out.push_back(apply_filter(need_string(a.pos[0], "map"), x, {}).json);
      else
        fail("map needs a filter name or attribute=");
    }
    return derived(std::move(out), {&v});
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (a.pos.empty()) fail(name + " needs an attribute name");
    Json out = Json::array();
    for (const Value& x : iterate(v)) {
      const Value field = index(x, a.pos[0]);
      bool ok;
      if (a.pos.size() >= 2) {
        Args rest;
        rest.pos.assign(a.pos.begin() + 2, a.pos.end());
        ok = apply_test(need_string(a.pos[1], name.c_str()), field, rest);
      } else {
        ok = truthy(field);
      }
      if (ok == (name == "selectattr")) out.push_back(x.json);
    }
    return derived(std::move(out), {&v});
  }
  fail("unknown filter '" + name + "'");
}

bool apply_test(const string& name, const Value& v, const Args& a) {
  const Json& j = v.json;
  const bool def = !v.undefined;
  if (name == "defined") return def;
  if (name == "undefined") return !def;
  if (name == "none") return def && !v.ns && j.is_null();
  if (name == "string") return v.is_string();
  if (name == "number") return def && !v.ns && j.is_number();
  if (name == "integer") return def && !v.ns && (j.is_number_integer() || j.is_number_unsigned());
  if (name == "float") return def && !v.ns && j.is_number_float();
  if (name == "boolean") return def && !v.ns && j.is_boolean();
  if (name == "true") return def && !v.ns && j.is_boolean() && j.get<bool>();
  if (name == "false") return def && !v.ns && j.is_boolean() && !j.get<bool>();
  if (name == "mapping") return def && !v.ns && j.is_object();
  if (name == "sequence") return def && !v.ns && (j.is_array() || j.is_string() || j.is_object());
  if (name == "iterable") return def && !v.ns && (j.is_array() || j.is_string() || j.is_object());
  if (name == "callable") return false;
  if (name == "even" || name == "odd") return need_int(v, name.c_str()) % 2 == (name == "odd");
  if (name == "divisibleby") {
    const Value* d = a.get(0, "num");
    if (!d) fail("divisibleby needs a number");
    const int64_t n = need_int(*d, "divisibleby");
    return n != 0 && int_mod(need_int(v, "divisibleby"), n) == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas" || name == "ne" ||
      name == "!=") {
    const Value* o = a.get(0, "other");
    if (!o) fail(name + " needs a value to compare with");
    return equal(v, *o) == (name != "ne" && name != "!=");
  }
  if (name == "lower") return v.is_string() && ascii_case(v.str(), false) == v.str();
  if (name == "upper") return v.is_string() && ascii_case(v.str(), true) == v.str();
  if (name == "in") {
    const Value* o = a.get(0, "seq");
    if (!o) fail("in needs a sequence");
    return contains(*o, v);
  }
  if (name == "gt" || name == "lt" || name == "ge" || name == "le") {
    const Value* o = a.get(0, "other");
    if (!o) fail(name + " needs a value to compare with");
    const int c = cmp_values(v, *o);
    return name == "gt" ? c > 0 : name == "lt" ? c < 0 : name == "ge" ? c >= 0 : c <= 0;
  }
  fail("unknown test '" + name + "'");
}

std::optional<Value> call_method(const Value& obj, const string& name, const Args& a) {
  if (obj.is_string()) {
    if (name == "strip") return strip(obj, a.get(0, "chars"), true, true);
    if (name == "lstrip") return strip(obj, a.get(0, "chars"), true, false);
    if (name == "rstrip") return strip(obj, a.get(0, "chars"), false, true);
    if (name == "split") return split(obj, a.get(0, "sep"), a.get(1, "maxsplit"), a.steps_left);
    if (name == "startswith" || name == "endswith") {
      if (!a.get(0, "prefix")) fail(name + " needs an argument");
      return Value::literal(Json(affix(obj, *a.get(0, "prefix"), name == "startswith")));
    }
    if (name == "replace") {
      if (!a.get(0, "old") || !a.get(1, "new")) fail("replace needs two arguments");
      return replace(obj, *a.get(0, "old"), *a.get(1, "new"), a.get(2, "count"));
    }
    if (name == "upper" || name == "lower") return apply_filter(name, obj, {});
    if (name == "capitalize") return apply_filter(name, obj, {});
    if (name == "join") {
      if (!a.get(0, "iterable")) fail("join needs a list");
      return join(obj, *a.get(0, "iterable"), nullptr);
    }
    if (name == "count") {
      const string& sub = need_string(*a.get(0, "x"), "count");
      size_t n = 0;
      if (!sub.empty())
        for (size_t at = obj.str().find(sub); at != string::npos;
             at = obj.str().find(sub, at + sub.size()))
          ++n;
      return Value::literal(Json(n));
    }
    return std::nullopt;
  }
  if (!obj.undefined && !obj.ns && obj.json.is_object()) {
    if (name == "items") return apply_filter("items", obj, {});
    if (name == "keys" || name == "values") {
      Json out = Json::array();
      for (const auto& [k, j] : obj.json.items()) out.push_back(name == "keys" ? Json(k) : j);
      return derived(std::move(out), {&obj});
    }
    if (name == "get") {
      if (!a.get(0, "key")) fail("get needs a key");
      Value r = index(obj, *a.get(0, "key"));
      if (r.undefined) {
        const Value* dflt = a.get(1, "default");
        return dflt ? *dflt : Value::literal(Json(nullptr));
      }
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace qmpi::jinja
