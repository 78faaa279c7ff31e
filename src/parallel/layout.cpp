#include "parallel/layout.h"

namespace qmpi {

std::string layout_flags(const Layout& l) {
  return "--tp " + std::to_string(l.tp) + " --pp " + std::to_string(l.pp);
}

}  // namespace qmpi
