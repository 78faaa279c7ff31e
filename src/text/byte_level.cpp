#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace qmpi::byte_level {
namespace {

constexpr bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<char32_t, 256> make_table() {
  std::array<char32_t, 256> t{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? b : next++;
  return t;
}

constexpr std::array<char32_t, 256> kByteToChar = make_table();

// Inverse over U+0000..U+0143, the whole range the table uses; -1 where no byte maps.
constexpr std::array<int16_t, 0x144> make_inverse() {
  std::array<int16_t, 0x144> inv{};
  for (auto& v : inv) v = -1;
  for (unsigned b = 0; b < 256; ++b) inv[kByteToChar[b]] = static_cast<int16_t>(b);
  return inv;
}

constexpr std::array<int16_t, 0x144> kCharToByte = make_inverse();

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return kByteToChar[b];
}

std::optional<uint8_t> char_to_byte(char32_t cp) {
  if (cp >= kCharToByte.size() || kCharToByte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(kCharToByte[cp]);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append(out, kByteToChar[static_cast<uint8_t>(c)]);
  return out;
}

std::string decode(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    auto b = char_to_byte(utf8::decode(token, i));
    if (!b) return std::string(token);
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace qmpi::byte_level
