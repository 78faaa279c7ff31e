// Numbers as people write them, for --help defaults and error messages.
#pragma once
#include <string>

namespace qmpi {

// The shortest text that reads back as v: "0.9", "300", "1e+300".
std::string decimal_text(double v);

}  // namespace qmpi
