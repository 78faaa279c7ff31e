// Tokens -> statements, with Jinja's expression precedence (lowest first): `x if c else y`, or,
// and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +, then primaries with their
// postfixes (.attr, [item], [a:b:c], (call)), filters (| f) and tests (is [not] t).
#pragma once
#include <string>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace qmpi::jinja {

// Throws ChatTemplateInvalid naming `name` and the line of the first thing it cannot parse.
Body parse(const std::vector<Token>& tokens, const std::string& name);

}  // namespace qmpi::jinja
