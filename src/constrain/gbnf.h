// Grammars in GBNF, llama.cpp's grammar format: `name ::= ...` rules (the one named `root`
// is matched), "literals", [classes], `.`, groups, alternation, the repetitions * + ? {m,n},
// and # comments. A syntax error is RequestField with its line and column.
#pragma once
#include <string_view>

#include "constrain/grammar.h"

namespace qmpi {

// Defines `text`'s rules in `g` and returns the rule named root (not finished: the caller
// finishes `g`).
int32_t parse_gbnf(std::string_view text, Grammar& g);

}  // namespace qmpi
