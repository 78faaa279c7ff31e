#include "core/byte_size.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "core/errors.h"

namespace qmpi {
namespace {

struct Unit {
  std::string_view suffix;
  double bytes;
};

constexpr std::array<Unit, 10> kUnits{{
    {"", 1.0},
    {"b", 1.0},
    {"kib", 1024.0},
    {"mib", 1024.0 * 1024},
    {"gib", 1024.0 * 1024 * 1024},
    {"tib", 1024.0 * 1024 * 1024 * 1024},
    {"kb", 1e3},
    {"mb", 1e6},
    {"gb", 1e9},
    {"tb", 1e12},
}};

std::string two_decimals(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

uint64_t parse_byte_size(const std::string& text, const std::string& option) {
  auto bad = [&](const std::string& why) -> uint64_t {
    raise(Err::Usage, option + " '" + text + "' " + why,
          "Write sizes with a unit, e.g. " + option + " 24GiB (binary) or " + option +
              " 80GB (decimal).");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return bad("does not start with a number");
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(0, i), &used);
    if (used != i) return bad("is not a number followed by a unit");
  } catch (const std::exception&) {
    return bad("is not a number followed by a unit");
  }
  std::string suffix;
  for (size_t j = i; j < text.size(); ++j)
    if (text[j] != ' ') suffix += char(std::tolower(static_cast<unsigned char>(text[j])));
  if (suffix == "k" || suffix == "m" || suffix == "g" || suffix == "t")
    return bad("has an ambiguous unit: use " + std::string(1, char(std::toupper(suffix[0]))) +
               "iB (1024-based) or " + std::string(1, char(std::toupper(suffix[0]))) +
               "B (1000-based)");
  for (const auto& u : kUnits) {
    if (u.suffix != suffix) continue;
    const double bytes = value * u.bytes;
    if (!(bytes >= 1.0) || bytes > 1.8e19) return bad("is out of range");
    return uint64_t(std::llround(bytes));
  }
  return bad("has an unknown unit (use KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
}

uint64_t parse_gpu_memory(const std::string& text, const std::string& option, std::string& note) {
  note.clear();
  const size_t unit = text.find_first_not_of("0123456789. ");
  std::string read_as;
  if (unit == std::string::npos && !text.empty()) {
    read_as = text + "GB";
  } else if (unit != std::string::npos && unit + 1 == text.size() &&
             std::string_view("kKmMgGtT").find(text[unit]) != std::string_view::npos) {
    read_as = text + "B";
  }
  if (read_as.empty()) return parse_byte_size(text, option);
  const uint64_t bytes = parse_byte_size(read_as, option);
  note = option + " " + text + " read as " + read_as + " (" + format_gib(bytes) +
         " GiB); write GiB for 1024-based units.";
  return bytes;
}

std::string format_gib(uint64_t bytes) {
  return two_decimals(double(bytes) / double(1ull << 30));
}

std::string format_gb(uint64_t bytes) {
  return two_decimals(double(bytes) / 1e9) + " GB";
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<std::string_view, 5> kNames{"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < kNames.size()) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return std::to_string(bytes) + " B";
  const bool whole = std::fabs(v - std::round(v)) < 1e-9;
  return (whole ? std::to_string(int64_t(std::llround(v))) : two_decimals(v)) + " " +
         std::string(kNames[u]);
}

}  // namespace qmpi
