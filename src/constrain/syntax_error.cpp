#include "constrain/syntax_error.h"

#include "core/errors.h"

namespace qmpi {

void raise_syntax_error(std::string_view kind, std::string_view text, size_t at,
                        const std::string& what) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else if ((uint8_t(text[i]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  raise(Err::RequestField, std::string(kind) + " syntax error at line " + std::to_string(line) +
                               ", column " + std::to_string(col) + ": " + what);
}

}  // namespace qmpi
