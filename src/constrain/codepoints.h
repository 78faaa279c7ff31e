// Sets of Unicode characters (regex and GBNF classes, JSON string characters) and their
// UTF-8 form as byte-level grammar expressions, so that a constrained output is always valid
// UTF-8: a class admits whole characters, never a stray byte.
#pragma once
#include <utility>
#include <vector>

#include "constrain/grammar.h"

namespace qmpi {

using CodepointRanges = std::vector<std::pair<char32_t, char32_t>>;  // inclusive

constexpr char32_t kMaxCodepoint = 0x10FFFF;

// Sorted, merged, without surrogates (U+D800-U+DFFF, which UTF-8 cannot hold).
CodepointRanges normalize(CodepointRanges r);
// Every character not in `r`.
CodepointRanges complement(const CodepointRanges& r);
CodepointRanges subtract(const CodepointRanges& a, const CodepointRanges& b);
bool contains(const CodepointRanges& r, char32_t c);
// One character of `r`, as alternatives of UTF-8 byte-range sequences.
ExprP utf8_class(const CodepointRanges& r);

}  // namespace qmpi
