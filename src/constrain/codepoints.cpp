#include "constrain/codepoints.h"

#include <algorithm>
#include <string>

#include "text/utf8.h"

namespace qmpi {

CodepointRanges normalize(CodepointRanges r) {
  CodepointRanges split;
  for (auto [lo, hi] : r) {
    hi = std::min(hi, kMaxCodepoint);
    if (lo > hi) continue;
    if (lo < 0xD800 && hi > 0xDFFF) {
      split.push_back({lo, 0xD7FF});
      split.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else {
      if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
      if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
      if (lo <= hi) split.push_back({lo, hi});
    }
  }
  std::sort(split.begin(), split.end());
  CodepointRanges out;
  for (auto [lo, hi] : split)
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  return out;
}

CodepointRanges complement(const CodepointRanges& r) {
  CodepointRanges out;
  char32_t next = 0;
  for (auto [lo, hi] : normalize(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return normalize(out);
}

CodepointRanges subtract(const CodepointRanges& a, const CodepointRanges& b) {
  CodepointRanges keep = complement(b);
  CodepointRanges out;
  for (auto [alo, ahi] : normalize(a))
    for (auto [klo, khi] : keep) {
      const char32_t lo = std::max(alo, klo), hi = std::min(ahi, khi);
      if (lo <= hi) out.push_back({lo, hi});
    }
  return normalize(out);
}

bool contains(const CodepointRanges& r, char32_t c) {
  return std::any_of(r.begin(), r.end(), [&](auto p) { return p.first <= c && c <= p.second; });
}

namespace {

// Splits [lo, hi] until both ends have the same UTF-8 length and differ only in whole trailing
// continuation bytes, then emits the byte ranges position by position.
void split_utf8(char32_t lo, char32_t hi, std::vector<ExprP>& out) {
  for (char32_t edge : {char32_t(0x7F), char32_t(0x7FF), char32_t(0xFFFF)})
    if (lo <= edge && hi > edge) {
      split_utf8(lo, edge, out);
      split_utf8(edge + 1, hi, out);
      return;
    }
  if (hi < 0x80) {
    out.push_back(gx::byte_range(uint8_t(lo), uint8_t(hi)));
    return;
  }
  const int len = hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
  for (int i = 1; i < len; ++i) {
    const char32_t m = (char32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_utf8(lo, lo | m, out);
        split_utf8((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_utf8(lo, (hi & ~m) - 1, out);
        split_utf8(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  utf8::append(a, lo);
  utf8::append(b, hi);
  std::vector<ExprP> bytes;
  for (size_t i = 0; i < a.size(); ++i)
    bytes.push_back(gx::byte_range(uint8_t(a[i]), uint8_t(b[i])));
  out.push_back(gx::seq(std::move(bytes)));
}

}  // namespace

ExprP utf8_class(const CodepointRanges& r) {
  std::vector<ExprP> alts;
  ByteSet ascii;
  bool any_ascii = false;
  for (auto [lo, hi] : normalize(r)) {
    if (lo < 0x80) {
      ascii.set_range(uint8_t(lo), uint8_t(std::min<char32_t>(hi, 0x7F)));
      any_ascii = true;
      if (hi < 0x80) continue;
      lo = 0x80;
    }
    split_utf8(lo, hi, alts);
  }
  if (any_ascii) alts.insert(alts.begin(), gx::bytes(ascii));
  return gx::alt(std::move(alts));
}

}  // namespace qmpi
