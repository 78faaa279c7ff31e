#include "core/decimal_text.h"

#include <charconv>

namespace qmpi {

std::string decimal_text(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

}  // namespace qmpi
