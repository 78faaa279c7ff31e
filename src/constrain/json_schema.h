// JSON Schema (the keywords OpenAI strict mode and xgrammar cover) compiled to a grammar whose
// strings are exactly the compact JSON texts (one optional space after ',' and ':') that the
// schema accepts, properties in the schema's order. A keyword it cannot honour is
// FieldUnsupported naming the keyword and its JSON pointer; it is never ignored. What is
// covered and its limits: docs/user-guide.md, "Structured output".
#pragma once
#include <cstddef>

#include <nlohmann/json.hpp>

#include "constrain/grammar.h"

namespace qmpi {

constexpr int kMaxSchemaDepth = 128;           // nested subschemas
constexpr size_t kMaxSchemaProperties = 4096;  // properties over the whole schema

// Defines the schema's rules in `g` and returns its root rule (not finished).
int32_t json_schema_grammar(const nlohmann::ordered_json& schema, Grammar& g);
// Any JSON object (response_format json_object).
int32_t json_object_grammar(Grammar& g);

// Integers in [lo, hi] written in decimal without leading zeros (for tests).
ExprP integer_range_expr(int64_t lo, int64_t hi);

}  // namespace qmpi
