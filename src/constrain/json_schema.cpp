#include "constrain/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "constrain/codepoints.h"
#include "constrain/regex.h"
#include "core/errors.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

// Keywords that describe and never constrain.
const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
const std::set<std::string> kHonoured = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "enum",
                                         "const",
                                         "items",
                                         "prefixItems",
                                         "minItems",
                                         "maxItems",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref"};

// RFC 3339 and the other formats, as patterns over the string's characters (each admits a
// subset of the format's valid strings: no February 29th, no leading zeros in IPv4 parts).
const std::map<std::string, std::string> kFormats = {
    {"date",
     "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|"
     "(0[13578]|1[02])-31)"},
    {"time",
     "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]"
     ")"},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    {"email",
     "[A-Za-z0-9_+-]{1,32}(\\.[A-Za-z0-9_+-]{1,32}){0,3}@[A-Za-z0-9]{1,32}(\\.[A-Za-z0-9]{1,32}){0,"
     "3}"
     "\\.[A-Za-z]{2,8}"},
    {"ipv4",
     "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]"
     ")){3}"},
};

[[noreturn]] void unsupported(const std::string& keyword, const std::string& ptr,
                              const std::string& why) {
  throw Error(Err::FieldUnsupported,
              "\"" + keyword + "\" at " + (ptr.empty() ? "/" : ptr) + ": " + why,
              "Rewrite the schema with the keywords docs/user-guide.md (Structured output) lists, "
              "or check that part after generation.")
      .with_param(keyword);
}

std::string child(const std::string& ptr, const std::string& key) {
  std::string k;
  for (char c : key) k += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return ptr + "/" + k;
}

ExprP comma() {
  return gx::seq({gx::lit(","), gx::opt(gx::lit(" "))});
}
ExprP colon() {
  return gx::seq({gx::lit(":"), gx::opt(gx::lit(" "))});
}

// Decimal digit strings of one length, lo <= hi.
ExprP digits_between(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return gx::empty();
  const size_t rest = lo.size() - 1;
  const auto any_digits = [](size_t n) {
    return gx::repeat(gx::byte_range('0', '9'), int64_t(n), int64_t(n));
  };
  if (lo[0] == hi[0])
    return gx::seq({gx::lit(lo.substr(0, 1)), digits_between(lo.substr(1), hi.substr(1))});
  if (lo.substr(1) == std::string(rest, '0') && hi.substr(1) == std::string(rest, '9'))
    return gx::seq({gx::byte_range(uint8_t(lo[0]), uint8_t(hi[0])), any_digits(rest)});
  std::vector<ExprP> alts;
  alts.push_back(
      gx::seq({gx::lit(lo.substr(0, 1)), digits_between(lo.substr(1), std::string(rest, '9'))}));
  if (hi[0] - lo[0] >= 2)
    alts.push_back(
        gx::seq({gx::byte_range(uint8_t(lo[0] + 1), uint8_t(hi[0] - 1)), any_digits(rest)}));
  alts.push_back(
      gx::seq({gx::lit(hi.substr(0, 1)), digits_between(std::string(rest, '0'), hi.substr(1))}));
  return gx::alt(std::move(alts));
}

ExprP unsigned_range(uint64_t lo, uint64_t hi) {
  std::vector<ExprP> alts;
  uint64_t first = 0, last = 9;  // the numbers with L digits
  for (size_t len = 1; len <= 20 && first <= hi; ++len) {
    const uint64_t a = std::max(lo, first), b = std::min(hi, last);
    if (a <= b) alts.push_back(digits_between(std::to_string(a), std::to_string(b)));
    if (len == 20) break;
    first = len == 1 ? 10 : first * 10;
    last = len >= 19 ? std::numeric_limits<uint64_t>::max() : last * 10 + 9;
  }
  return gx::alt(std::move(alts));
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, Grammar& g) : root_(root), g_(g) {}

  ExprP compile(const json& s, const std::string& ptr, int depth) {
    if (depth > kMaxSchemaDepth)
      throw Error(
          Err::FieldUnsupported,
          "the schema nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels at " + ptr,
          "Flatten the schema, or use \"$ref\" for recursive structures.");
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      unsupported("false", ptr, "a schema that admits no value");
    }
    if (!s.is_object())
      throw Error(Err::FieldUnsupported,
                  "the schema at " + (ptr.empty() ? "/" : ptr) + " is not an object or a boolean");
    for (const auto& [k, v] : s.items())
      if (!kHonoured.count(k) && !kAnnotations.count(k))
        unsupported(k, child(ptr, k), "qmpi cannot constrain output to this keyword");

    if (s.contains("$ref")) {
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && kHonoured.count(k))
          unsupported(k, child(ptr, k), "a keyword beside \"$ref\"");
      return gx::ref(ref_rule(s.at("$ref"), child(ptr, "$ref"), depth));
    }
    if (s.contains("allOf")) return compile(merge_all_of(s, ptr), ptr, depth + 1);
    for (const char* comb : {"anyOf", "oneOf"})
      if (s.contains(comb)) {
        const json& list = s.at(comb);
        if (!list.is_array() || list.empty())
          unsupported(comb, child(ptr, comb), "it must be a non-empty array");
        for (const auto& [k, v] : s.items())
          if (k != comb && kHonoured.count(k))
            unsupported(k, child(ptr, k), std::string("a keyword beside \"") + comb + "\"");
        std::vector<ExprP> alts;
        for (size_t i = 0; i < list.size(); ++i)
          alts.push_back(compile(list[i], child(child(ptr, comb), std::to_string(i)), depth + 1));
        return gx::alt(std::move(alts));
      }
    if (s.contains("const")) return gx::lit(s.at("const").dump());
    if (s.contains("enum")) {
      const json& e = s.at("enum");
      if (!e.is_array() || e.empty())
        unsupported("enum", child(ptr, "enum"), "it must be a non-empty array");
      std::vector<ExprP> alts;
      for (const auto& v : e) alts.push_back(gx::lit(v.dump()));
      return gx::alt(std::move(alts));
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s.at("type");
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string())
            unsupported("type", child(ptr, "type"), "a type name must be a string");
          types.push_back(x.get<std::string>());
        }
      } else {
        unsupported("type", child(ptr, "type"),
                    "it must be a type name or a non-empty list of them");
      }
    } else {
      types = implied_types(s);
      if (types.empty()) return any_value();
    }
    std::vector<ExprP> alts;
    for (const auto& t : types) alts.push_back(typed(t, s, ptr, depth));
    return gx::alt(std::move(alts));
  }

  ExprP any_value() {
    if (value_ < 0) define_any();
    return gx::ref(value_);
  }
  int32_t any_object_rule() {
    if (value_ < 0) define_any();
    return object_;
  }

 private:
  static std::vector<std::string> implied_types(const json& s) {
    std::vector<std::string> t;
    const auto has = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
    };
    if (has({"properties", "required", "additionalProperties"})) t.push_back("object");
    if (has({"items", "prefixItems", "minItems", "maxItems"})) t.push_back("array");
    if (has({"minLength", "maxLength", "pattern", "format"})) t.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) t.push_back("number");
    return t;
  }

  ExprP typed(const std::string& t, const json& s, const std::string& ptr, int depth) {
    if (t == "object") return object(s, ptr, depth);
    if (t == "array") return array(s, ptr, depth);
    if (t == "string") return string(s, ptr);
    if (t == "integer") return integer(s, ptr);
    if (t == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k))
          unsupported(k, child(ptr, k), "bounds are supported on integers, not on numbers");
      return number();
    }
    if (t == "boolean") return gx::alt({gx::lit("true"), gx::lit("false")});
    if (t == "null") return gx::lit("null");
    unsupported("type", child(ptr, "type"), "\"" + t + "\" is not a JSON Schema type");
  }

  json merge_all_of(const json& s, const std::string& ptr) {
    const json& list = s.at("allOf");
    if (!list.is_array() || list.empty())
      unsupported("allOf", child(ptr, "allOf"), "it must be a non-empty array");
    json merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = child(child(ptr, "allOf"), std::to_string(i));
      const json& sub = list[i];
      if (!sub.is_object()) unsupported("allOf", at, "only object subschemas can be combined");
      for (const auto& [k, v] : sub.items()) {
        if (k == "properties" && v.is_object()) {
          for (const auto& [name, ps] : v.items()) {
            if (merged["properties"].contains(name) && merged["properties"][name] != ps)
              unsupported("allOf", child(at, "properties"),
                          "\"" + name + "\" is given two different schemas");
            merged["properties"][name] = ps;
          }
        } else if (k == "required" && v.is_array()) {
          for (const auto& r : v)
            if (!merged.contains("required") ||
                std::find(merged["required"].begin(), merged["required"].end(), r) ==
                    merged["required"].end())
              merged["required"].push_back(r);
        } else if (kAnnotations.count(k)) {
        } else if (!merged.contains(k)) {
          merged[k] = v;
        } else if (merged[k] != v) {
          unsupported(k, child(at, k), "\"allOf\" gives it two different values");
        }
      }
    }
    return merged;
  }

  int32_t ref_rule(const json& ref, const std::string& ptr, int depth) {
    if (!ref.is_string()) unsupported("$ref", ptr, "it must be a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#')
      unsupported("$ref", ptr, "only references into this schema (#...) are supported");
    const auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    const json* target = nullptr;
    try {
      target = r == "#" ? &root_ : &root_.at(json::json_pointer(r.substr(1)));
    } catch (const json::exception&) {
      unsupported("$ref", ptr, "\"" + r + "\" names nothing in the schema");
    }
    const int32_t rule = g_.add_rule(r);
    refs_.emplace(r, rule);
    g_.define(rule, compile(*target, r.substr(1), depth + 1));
    return rule;
  }

  ExprP key(const std::string& name) { return gx::lit(json(name).dump()); }

  ExprP object(const json& s, const std::string& ptr, int depth) {
    struct Prop {
      std::string name;
      ExprP value;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      const json& req = s.at("required");
      if (!req.is_array())
        unsupported("required", child(ptr, "required"), "it must be an array of names");
      for (const auto& r : req) {
        if (!r.is_string())
          unsupported("required", child(ptr, "required"), "it must be an array of names");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      const json& p = s.at("properties");
      if (!p.is_object())
        unsupported("properties", child(ptr, "properties"), "it must be an object");
      for (const auto& [name, sub] : p.items()) {
        if (++properties_ > kMaxSchemaProperties)
          throw Error(
              Err::FieldUnsupported,
              "the schema has more than " + std::to_string(kMaxSchemaProperties) + " properties",
              "Split the request, or describe repeated fields with an array.");
        props.push_back({name, compile(sub, child(child(ptr, "properties"), name), depth + 1),
                         required.count(name) > 0});
      }
    }
    for (const auto& r : required)
      if (std::none_of(props.begin(), props.end(), [&](const Prop& p) { return p.name == r; }))
        props.push_back({r, any_value(), true});

    // Extra members: none unless additionalProperties allows them (true or a schema).
    ExprP extra;
    if (s.contains("additionalProperties")) {
      const json& ap = s.at("additionalProperties");
      if (!(ap.is_boolean() && !ap.get<bool>()))
        extra = gx::seq(
            {string_value(), colon(), compile(ap, child(ptr, "additionalProperties"), depth + 1)});
    }
    // rest_after(i): the members from i on when one was already written; rest_first(i): when
    // none was (no comma before the next).
    ExprP after = extra ? gx::repeat(gx::seq({comma(), extra}), 0, -1) : gx::empty();
    ExprP first = extra ? gx::opt(gx::seq({extra, after})) : gx::empty();
    for (size_t i = props.size(); i-- > 0;) {
      const int32_t after_rule = g_.add_rule("");
      g_.define(after_rule, after);
      const ExprP member = gx::seq({key(props[i].name), colon(), props[i].value});
      const ExprP taken_after = gx::seq({comma(), member, gx::ref(after_rule)});
      const ExprP taken_first = gx::seq({member, gx::ref(after_rule)});
      const int32_t first_rule = g_.add_rule("");
      g_.define(first_rule, first);
      after = props[i].required ? taken_after : gx::alt({taken_after, gx::ref(after_rule)});
      first = props[i].required ? taken_first : gx::alt({taken_first, gx::ref(first_rule)});
    }
    return gx::seq({gx::lit("{"), first, gx::lit("}")});
  }

  int64_t count(const json& s, const char* k, const std::string& ptr, int64_t absent) {
    if (!s.contains(k)) return absent;
    const json& v = s.at(k);
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      unsupported(k, child(ptr, k), "it must be a non-negative integer");
    return v.get<int64_t>();
  }

  ExprP array(const json& s, const std::string& ptr, int depth) {
    std::vector<ExprP> prefix;
    const json* items = s.contains("items") ? &s.at("items") : nullptr;
    const json* tuple = s.contains("prefixItems") ? &s.at("prefixItems") : nullptr;
    std::string tuple_key = "prefixItems";
    if (items && items->is_array()) tuple = items, items = nullptr, tuple_key = "items";
    if (tuple) {
      if (!tuple->is_array()) unsupported(tuple_key, child(ptr, tuple_key), "it must be an array");
      for (size_t i = 0; i < tuple->size(); ++i)
        prefix.push_back(
            compile((*tuple)[i], child(child(ptr, tuple_key), std::to_string(i)), depth + 1));
    }
    ExprP rest;  // null: no items past the prefix
    if (!items)
      rest = any_value();
    else if (!(items->is_boolean() && !items->get<bool>()))
      rest = compile(*items, child(ptr, "items"), depth + 1);
    const int64_t lo = count(s, "minItems", ptr, 0);
    int64_t hi = count(s, "maxItems", ptr, -1);
    const auto k = int64_t(prefix.size());
    if (!rest) hi = hi < 0 ? k : std::min(hi, k);
    if (hi >= 0 && lo > hi)
      unsupported("minItems", child(ptr, "minItems"), "no array length fits minItems and maxItems");

    // tail(i): the elements after the first i when i have been written.
    std::function<ExprP(int64_t)> tail = [&](int64_t i) -> ExprP {
      if (hi >= 0 && i >= hi) return gx::empty();
      if (i >= k) {
        const int64_t more_min = std::max<int64_t>(lo - i, 0);
        return gx::repeat(gx::seq({comma(), rest}), more_min, hi < 0 ? -1 : hi - i);
      }
      const ExprP next = gx::seq({comma(), prefix[size_t(i)], tail(i + 1)});
      return i >= lo ? gx::opt(next) : next;
    };
    ExprP body;
    if (hi == 0) {
      body = gx::empty();
    } else {
      const ExprP first = gx::seq({k > 0 ? prefix[0] : rest, tail(1)});
      body = lo == 0 ? gx::opt(first) : first;
    }
    return gx::seq({gx::lit("["), body, gx::lit("]")});
  }

  ExprP string_value() {
    return gx::seq({gx::lit("\""), gx::repeat(string_char(), 0, -1), gx::lit("\"")});
  }
  ExprP string_char() {
    if (char_ < 0) {
      char_ = g_.add_rule("json-char");
      g_.define(char_, char_expr({{0, kMaxCodepoint}}, true));
    }
    return gx::ref(char_);
  }

  ExprP string(const json& s, const std::string& ptr) {
    const int64_t lo = count(s, "minLength", ptr, 0), hi = count(s, "maxLength", ptr, -1);
    if (hi >= 0 && lo > hi)
      unsupported("minLength", child(ptr, "minLength"), "it is above maxLength");
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    for (const char* k : {"pattern", "format"})
      if (s.contains(k)) {
        if (lengths)
          unsupported(k, child(ptr, k), "it cannot be combined with minLength/maxLength");
        if (!s.at(k).is_string()) unsupported(k, child(ptr, k), "it must be a string");
      }
    if (s.contains("pattern") && s.contains("format"))
      unsupported("format", child(ptr, "format"), "it cannot be combined with pattern");
    ExprP body;
    if (s.contains("pattern")) {
      try {
        body =
            regex_expr(s.at("pattern").get<std::string>(), {.search = true, .json_string = true});
      } catch (Error& e) {
        throw Error(e.code(), child(ptr, "pattern") + ": " + e.message()).with_param("pattern");
      }
    } else if (s.contains("format")) {
      const auto f = s.at("format").get<std::string>();
      if (f == "date-time") {
        body = gx::seq({regex_expr(kFormats.at("date"), {}), gx::lit("T"),
                        regex_expr(kFormats.at("time"), {})});
      } else {
        const auto it = kFormats.find(f);
        if (it == kFormats.end())
          unsupported("format", child(ptr, "format"),
                      "\"" + f + "\" is not one of date, time, date-time, uuid, email, ipv4");
        body = regex_expr(it->second, {});
      }
    } else {
      body = gx::repeat(string_char(), lo, hi);
    }
    return gx::seq({gx::lit("\""), body, gx::lit("\"")});
  }

  // A bound of an integer: minimum/maximum and the exclusive ones (numbers in draft 6 and
  // later, flags on minimum/maximum in draft 4).
  ExprP integer(const json& s, const std::string& ptr) {
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    bool bounded = false;
    const auto num = [&](const char* k) {
      const json& v = s.at(k);
      if (!v.is_number()) unsupported(k, child(ptr, k), "it must be a number");
      const double d = v.get<double>();
      if (std::abs(d) > 9.0e18)
        unsupported(k, child(ptr, k), "bounds beyond 64-bit integers are not supported");
      bounded = true;
      return d;
    };
    const auto flag = [&](const char* k) {
      return s.contains(k) && s.at(k).is_boolean() && s.at(k).get<bool>();
    };
    if (s.contains("minimum")) {
      const double d = num("minimum");
      lo = std::max(lo,
                    flag("exclusiveMinimum") ? int64_t(std::floor(d)) + 1 : int64_t(std::ceil(d)));
    }
    if (s.contains("maximum")) {
      const double d = num("maximum");
      hi = std::min(hi,
                    flag("exclusiveMaximum") ? int64_t(std::ceil(d)) - 1 : int64_t(std::floor(d)));
    }
    if (s.contains("exclusiveMinimum") && !s.at("exclusiveMinimum").is_boolean())
      lo = std::max(lo, int64_t(std::floor(num("exclusiveMinimum"))) + 1);
    if (s.contains("exclusiveMaximum") && !s.at("exclusiveMaximum").is_boolean())
      hi = std::min(hi, int64_t(std::ceil(num("exclusiveMaximum"))) - 1);
    if (lo > hi)
      unsupported("minimum", child(ptr, "minimum"), "no integer lies between the bounds");
    if (!bounded) return integer_any();
    return integer_range_expr(lo, hi);
  }

  ExprP integer_any() {
    return gx::seq(
        {gx::opt(gx::lit("-")),
         gx::alt({gx::lit("0"), gx::seq({gx::byte_range('1', '9'),
                                         gx::repeat(gx::byte_range('0', '9'), 0, -1)})})});
  }
  ExprP number() {
    const ExprP digits = gx::repeat(gx::byte_range('0', '9'), 1, -1);
    ByteSet sign;
    sign.set('+');
    sign.set('-');
    ByteSet e;
    e.set('e');
    e.set('E');
    return gx::seq({integer_any(), gx::opt(gx::seq({gx::lit("."), digits})),
                    gx::opt(gx::seq({gx::bytes(e), gx::opt(gx::bytes(sign)), digits}))});
  }

  void define_any() {
    value_ = g_.add_rule("json-value");
    object_ = g_.add_rule("json-object");
    const int32_t array = g_.add_rule("json-array");
    const ExprP v = gx::ref(value_);
    const ExprP member = gx::seq({string_value(), colon(), v});
    g_.define(object_,
              gx::seq({gx::lit("{"),
                       gx::opt(gx::seq({member, gx::repeat(gx::seq({comma(), member}), 0, -1)})),
                       gx::lit("}")}));
    g_.define(array, gx::seq({gx::lit("["),
                              gx::opt(gx::seq({v, gx::repeat(gx::seq({comma(), v}), 0, -1)})),
                              gx::lit("]")}));
    g_.define(value_, gx::alt({gx::ref(object_), gx::ref(array), string_value(), number(),
                               gx::lit("true"), gx::lit("false"), gx::lit("null")}));
  }

  const json& root_;
  Grammar& g_;
  std::map<std::string, int32_t> refs_;
  size_t properties_ = 0;
  int32_t value_ = -1, object_ = -1, char_ = -1;
};

}  // namespace

ExprP integer_range_expr(int64_t lo, int64_t hi) {
  std::vector<ExprP> alts;
  if (hi >= 0) alts.push_back(unsigned_range(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi)));
  if (lo < 0) {
    // -x for x in [max(1, -hi), -lo], in unsigned arithmetic (-INT64_MIN does not fit).
    const uint64_t a = hi < 0 ? uint64_t(0) - uint64_t(hi) : 1, b = uint64_t(0) - uint64_t(lo);
    alts.push_back(gx::seq({gx::lit("-"), unsigned_range(a, b)}));
  }
  return gx::alt(std::move(alts));
}

int32_t json_schema_grammar(const json& schema, Grammar& g) {
  SchemaCompiler c(schema, g);
  const int32_t root = g.add_rule("schema");
  g.define(root, c.compile(schema, "", 0));
  return root;
}

int32_t json_object_grammar(Grammar& g) {
  const json any = json::object();
  SchemaCompiler c(any, g);
  return c.any_object_rule();
}

}  // namespace qmpi
