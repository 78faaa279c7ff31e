#include "requests/request_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <system_error>
#include <vector>

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool number_char(char c) {
  return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// The power of ten of the literal's first significant digit (1e400 -> 400, 0.05 -> -2), or
// nullopt for zero. Only called for literals from_chars found out of range, to tell an
// overflow from an underflow without depending on the locale (strtod does).
std::optional<int64_t> decimal_magnitude(std::string_view lit) {
  size_t i = lit.empty() || lit[0] != '-' ? 0 : 1;
  int64_t int_digits = 0, lead = -1;  // lead: magnitude before the exponent
  bool seen_nonzero = false;
  for (; i < lit.size() && is_digit(lit[i]); ++i) {
    seen_nonzero = seen_nonzero || lit[i] != '0';
    if (seen_nonzero) ++int_digits;
  }
  if (seen_nonzero) lead = int_digits - 1;
  if (i < lit.size() && lit[i] == '.') {
    int64_t pos = 0;
    for (++i; i < lit.size() && is_digit(lit[i]); ++i) {
      ++pos;
      if (!seen_nonzero && lit[i] != '0') {
        seen_nonzero = true;
        lead = -pos;
      }
    }
  }
  if (!seen_nonzero) return std::nullopt;
  int64_t exp = 0;
  if (i < lit.size() && (lit[i] == 'e' || lit[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < lit.size() && (lit[i] == '+' || lit[i] == '-')) negative = lit[i++] == '-';
    for (; i < lit.size() && is_digit(lit[i]); ++i)
      exp = std::min<int64_t>(exp * 10 + (lit[i] - '0'), int64_t(1) << 40);  // saturates
    if (negative) exp = -exp;
  }
  return lead + exp;
}

bool overflows_double(std::string_view lit) {
  double v = 0;
  const auto [end, ec] = std::from_chars(lit.data(), lit.data() + lit.size(), v);
  if (ec == std::errc()) return std::isinf(v);
  if (ec != std::errc::result_out_of_range) return false;  // not a number: the parser says so
  const auto mag = decimal_magnitude(lit);
  return mag && *mag >= 0;
}

std::string shortened(std::string_view s, size_t limit) {
  return s.size() <= limit ? std::string(s) : std::string(s.substr(0, limit - 3)) + "...";
}

}  // namespace

void check_json_shape(std::string_view text, int max_depth, size_t max_keys) {
  // Keys per open object, counted by their ':' (the parser's ordered objects insert a key in
  // time linear in the keys before it, so an object's key count must be bounded before it).
  std::vector<size_t> keys(size_t(std::max(max_depth, 0)) + 2, 0);
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth)
        raise(Err::RequestJson, "the JSON nests deeper than " + std::to_string(max_depth) +
                                    " levels, which no request needs");
      keys[size_t(depth)] = 0;
    } else if (ch == ']' || ch == '}') {
      depth = std::max(depth - 1, 0);
    } else if (ch == ':' && ++keys[size_t(depth)] > max_keys) {
      raise(Err::RequestJson, "an object of the JSON has more than " + std::to_string(max_keys) +
                                  " keys, which no request needs");
    }
  }
}

std::vector<NumberOverflow> find_number_overflows(std::string_view text) {
  std::vector<NumberOverflow> found;
  std::string_view last_string, key;
  bool in_string = false, escaped = false;
  size_t string_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
        last_string = text.substr(string_start, i - string_start);
      }
    } else if (ch == '"') {
      in_string = true;
      string_start = i + 1;
    } else if (ch == ':') {
      key = last_string;
    } else if (ch == '-' || is_digit(ch)) {
      size_t end = i;
      while (end < text.size() && number_char(text[end])) ++end;
      const std::string_view lit = text.substr(i, end - i);
      if (overflows_double(lit)) found.push_back({i, lit.size(), std::string(key)});
      i = end - 1;
    }
  }
  return found;
}

RequestJson parse_request_json(std::string_view text, const std::string& what) {
  try {
    check_json_shape(text);
  } catch (const Error& e) {
    raise(e.code(), what + ": " + e.message());
  }
  RequestJson out;
  const std::vector<NumberOverflow> overflows = find_number_overflows(text);
  std::string patched;
  if (!overflows.empty()) {
    // The parser refuses these numbers outright; read them as null so that the rest (the id
    // above all) can still be read, and keep the error for the caller. (null, not 0: an id
    // that overflowed must not be echoed as 0.)
    patched.reserve(text.size());
    size_t at = 0;
    for (const NumberOverflow& o : overflows) {
      patched.append(text.substr(at, o.offset - at)).append("null");
      at = o.offset + o.size;
    }
    patched.append(text.substr(at));
    const NumberOverflow& first = overflows.front();
    const std::string lit = shortened(text.substr(first.offset, first.size), 40);
    const std::string where =
        first.key.empty() ? std::string() : " (in \"" + shortened(first.key, 64) + "\")";
    out.number_error =
        Error(Err::RequestField, what + ": the number " + lit + where +
                                     " is out of range: numbers must fit in a double (at most "
                                     "about 1.8e308 in magnitude)");
    text = patched;
  }
  try {
    out.value = json::parse(text);
  } catch (const json::parse_error& e) {
    raise(Err::RequestJson, what + " is not valid JSON (" + e.what() + ")");
  } catch (const json::exception& e) {
    // Any other refusal of the parser is about the text too, never an internal error.
    raise(Err::RequestJson, what + " could not be read as JSON (" + e.what() + ")");
  }
  return out;
}

}  // namespace qmpi
