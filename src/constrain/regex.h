// Regular expressions in the ECMAScript subset JSON Schema's `pattern` uses (classes, escapes,
// quantifiers with bounds, groups, alternation, anchors), compiled to a grammar expression.
// Lookaround, backreferences, word boundaries and Unicode property classes are refused with
// RequestField naming the line and column.
#pragma once
#include <string_view>

#include "constrain/codepoints.h"
#include "constrain/grammar.h"

namespace qmpi {

struct RegexMode {
  // JSON Schema `pattern`: the string only has to contain a match (^ and $ anchor it);
  // otherwise (guided_regex) the whole output must match and ^ $ at the ends change nothing.
  bool search = false;
  // The match is the inside of a JSON string: characters JSON must escape (", \, control
  // characters) are produced as their escapes.
  bool json_string = false;
};

ExprP regex_expr(std::string_view pattern, RegexMode mode);

// One character of `chars` as it is written: raw UTF-8, or inside a JSON string (escaped as
// JSON needs).
ExprP char_expr(const CodepointRanges& chars, bool json_string);

}  // namespace qmpi
