// What a request constrains its output to, before compilation: the kind and its text (a JSON
// schema or choice list as JSON text, a regex, a GBNF grammar, a tool-call description). The
// text is also the compiled-constraint cache's key.
#pragma once
#include <memory>
#include <string>

#include "constrain/grammar.h"

namespace qmpi {

enum class ConstraintKind : uint8_t {
  JsonSchema,  // text: the schema
  JsonObject,  // any JSON object (text unused)
  Regex,       // the whole output matches
  Choice,      // text: a JSON array of strings; the output is one of them
  Gbnf,
  // A Qwen tool call continuing tool_call_prefill's text; text: {"named": bool, "tools":
  // [{"name", "parameters"}]} (one tool when named).
  ToolCall,
};

struct ConstraintSource {
  ConstraintKind kind = ConstraintKind::JsonObject;
  std::string text;
};

// Compiles (RequestField, FieldUnsupported on a bad source).
std::shared_ptr<const Grammar> compile_grammar(const ConstraintSource& src);

}  // namespace qmpi
