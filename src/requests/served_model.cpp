#include "requests/served_model.h"

#include <algorithm>

#include "core/errors.h"

namespace qmpi {

int32_t check_served_model(const std::string& requested, std::span<const std::string> names,
                           std::span<const std::string> adapters) {
  const auto adapter = std::find(adapters.begin(), adapters.end(), requested);
  if (!requested.empty() && adapter != adapters.end()) return int32_t(adapter - adapters.begin());
  if (requested.empty() || names.empty()) return -1;
  if (std::find(names.begin(), names.end(), requested) != names.end()) return -1;
  std::string served = "\"" + names.front() + "\"";
  for (const std::string& a : adapters) served += ", \"" + a + "\"";
  raise(Err::ModelNotFound,
        "the model \"" + requested.substr(0, 200) + "\" does not exist on this server (it serves " +
            served + ")",
        "Send \"model\": \"" + names.front() +
            "\" (GET /v1/models lists the names), or start the "
            "server with --served-model-name.");
}

std::string percent_decode(std::string_view s) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      const int hi = i + 1 < s.size() ? hex(s[i + 1]) : -1;
      const int lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
      if (hi >= 0 && lo >= 0) {
        out += char(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace qmpi
