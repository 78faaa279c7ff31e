#include "text/utf8.h"

namespace qmpi::utf8 {

Unit next_unit(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {Unit::Char, 1};
  size_t need;        // bytes in the whole character
  uint8_t lo = 0x80;  // allowed range of the second byte (Table 3-7 narrows it for some leads)
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Unit::Invalid, 1};
  }
  for (size_t k = 1; k < need; ++k) {
    if (k >= s.size()) return {Unit::Incomplete, k};
    const auto b = static_cast<uint8_t>(s[k]);
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {Unit::Invalid, k};
  }
  return {Unit::Char, need};
}

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Unit u = next_unit(s.substr(i));
    if (u.kind != Unit::Char) return i;
    i += u.len;
  }
  return i;
}

std::string make_valid(std::string_view s) {
  size_t bad = find_invalid(s);
  if (bad == s.size()) return std::string(s);
  std::string out(s.substr(0, bad));
  out.reserve(s.size() + 8);
  size_t i = bad;
  while (i < s.size()) {
    const Unit u = next_unit(s.substr(i));
    if (u.kind == Unit::Char)
      out.append(s.substr(i, u.len));
    else
      out.append(kReplacement);
    i += u.len;
  }
  return out;
}

char32_t decode(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace qmpi::utf8
