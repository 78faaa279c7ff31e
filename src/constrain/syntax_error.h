// A syntax error in a regex or GBNF text, with the line and column (1-based, in characters)
// where it was found: RequestField.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace qmpi {

[[noreturn]] void raise_syntax_error(std::string_view kind, std::string_view text, size_t at,
                                     const std::string& what);

}  // namespace qmpi
