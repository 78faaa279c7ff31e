// Tokens -> statements, with Jinja's expression precedence (lowest first): `x if c else y`, or,
// and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +, then primaries with their
// postfixes (.attr, [item], [a:b:c], (call)), filters (| f) and tests (is [not] t).
#pragma once
#include <string>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"
#include "text/jinja_limits.h"

namespace qmpi::jinja {

// Throws ChatTemplateInvalid naming `name` and the line of the first thing it cannot parse, or
// of the block or expression that nests deeper than limits.parse_depth (the renderer and the
// tree's destructor recurse as deep as the tree, so depth is bounded where it is built).
Body parse(const std::vector<Token>& tokens, const std::string& name, const Limits& limits);

}  // namespace qmpi::jinja
