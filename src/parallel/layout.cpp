#include "parallel/layout.h"

namespace qmpi {

std::string layout_flags(const Layout& l) {
  return (l.dp > 1 ? "--dp " + std::to_string(l.dp) + " " : std::string()) + "--tp " +
         std::to_string(l.tp) + " --pp " + std::to_string(l.pp);
}

}  // namespace qmpi
