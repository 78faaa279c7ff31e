#include "engine/sampling_params.h"

#include <charconv>

namespace qmpi {
std::string decimal_text(double v) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string SamplingRange::text() const {
  std::string s;
  if (max >= std::numeric_limits<int32_t>::max())  // an integer's whole range from min
    s = (min_open ? "above " : "at least ") + decimal_text(min);
  else
    s = "in " + std::string(min_open ? "(" : "[") + decimal_text(min) + ", " + decimal_text(max) +
        (max_open ? ")" : "]");
  return off ? decimal_text(*off) + " (off) or " + s : s;
}

double sampling_value(const SamplingParams& p, const SamplingField& row) {
  return std::visit([&p](auto member) { return double(p.*member); }, row.member);
}

}  // namespace qmpi
