// What Jinja (and Python underneath it) offers a template beyond operators: filters (x | f),
// tests (x is t), and the methods templates call on strings, mappings and lists. The set is
// what Hugging Face chat templates use, with Python's semantics (strip() strips Unicode
// whitespace, split() without a separator splits on runs of it, lengths count characters).
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace qmpi::jinja {

// A failure inside a builtin; the evaluator adds the template line.
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The render's steps left. Every item of a builtin's list result costs a step once it is
  // returned, so a builtin that builds one item at a time (split, list) fails as soon as it
  // passes this, before a 64 MiB string has become tens of millions of items in memory.
  int64_t steps_left = INT64_MAX;
  // Positional `i` or keyword `name`, or nullptr when neither was given.
  const Value* get(size_t i, const char* name) const;
};

Value apply_filter(const std::string& name, const Value& v, const Args& args);
bool apply_test(const std::string& name, const Value& v, const Args& args);
// obj.name(args); nullopt when `obj` has no such method.
std::optional<Value> call_method(const Value& obj, const std::string& name, const Args& args);

// Python's `in`, ==, <, and string concatenation keeping exact provenance spans.
bool contains(const Value& container, const Value& item);
bool equal(const Value& a, const Value& b);
Value concat(const Value& a, const Value& b);
// Strings and lists by index or slice, Python style (negative indices count from the end).
Value index(const Value& v, const Value& key);
Value slice(const Value& v, const Value* start, const Value* stop, const Value* step);
// The items a for loop visits: list elements, mapping keys, string characters.
std::vector<Value> iterate(const Value& v);
size_t length(const Value& v);

}  // namespace qmpi::jinja
