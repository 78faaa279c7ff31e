// The values a chat template computes with: JSON (insertion-ordered, so tojson writes keys in the
// order the request gave them, as Python's json.dumps does) plus what Jinja adds: undefined,
// namespace() objects, and a provenance mark. The mark records which bytes of a string came from
// the caller's data (messages, tools, kwargs) rather than from the template's own text, so the
// tokenizer can encode those bytes with special-token parsing off (role safety).
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qmpi::jinja {

using Json = nlohmann::ordered_json;

// A byte range [begin, end) of a rendered or computed string.
struct Span {
  size_t begin = 0;
  size_t end = 0;
};

struct Value;
using Namespace = std::map<std::string, Value>;

struct Value {
  Json json;
  bool undefined = false;
  // Non-strings: the value came from (or holds something from) the caller's data.
  bool from_data = false;
  // Strings: the byte ranges that came from the caller's data (sorted, disjoint).
  std::vector<Span> plain;
  // A namespace() object: shared, so `set ns.x` is seen through every copy.
  std::shared_ptr<Namespace> ns;

  static Value make_undefined() {
    Value v;
    v.undefined = true;
    return v;
  }
  static Value literal(Json j) {
    Value v;
    v.json = std::move(j);
    return v;
  }
  // Caller data: every string inside it is plain text.
  static Value data(Json j);

  bool is_string() const { return !undefined && !ns && json.is_string(); }
  // True when anything in the value came from the caller's data.
  bool tainted() const { return from_data || !plain.empty(); }
  const std::string& str() const { return json.get_ref<const std::string&>(); }
};

// A string result computed from `inputs`: wholly plain when any input was tainted. Operations
// that move bytes around (strip, split, slicing) use it; only concatenation keeps exact spans.
Value derived_string(std::string s, std::initializer_list<const Value*> inputs);
// A non-string result computed from `inputs`.
Value derived(Json j, std::initializer_list<const Value*> inputs);

// Python truthiness: "", 0, [], {}, none and undefined are false.
bool truthy(const Value& v);
// Python's str(): what {{ v }} prints (None, True, 1.5, ['a', 1], {'k': 'v'}).
std::string to_text(const Value& v);
// Python's json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none, ", " and ": ").
std::string py_json_dumps(const Json& j, int indent = -1);
// The Jinja type name used in error messages ("string", "list", "undefined", ...).
std::string type_name(const Value& v);

}  // namespace qmpi::jinja
