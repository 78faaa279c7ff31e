// GPT-2's byte-level alphabet: every byte gets a printable code point so that BPE vocabularies
// can be stored as text. Printable Latin-1 bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for
// themselves; the other 68 bytes, in increasing order, take U+0100, U+0101, ... (space -> U+0120
// 'Ġ', newline -> U+010A 'Ċ', tab -> U+0109 'ĉ').
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qmpi::byte_level {

char32_t byte_to_char(uint8_t b);
// The byte a code point stands for, or nothing when it is outside the alphabet.
std::optional<uint8_t> char_to_byte(char32_t cp);

// Raw bytes -> their byte-level spelling (UTF-8 of the mapped code points).
std::string encode(std::string_view bytes);

// A token's text -> the bytes it stands for. Like Hugging Face's ByteLevel decoder, a token with
// any character outside the alphabet (added tokens such as "<|im_end|>" are fine, "<s p>" with its
// plain space is not) stands for its own UTF-8 bytes instead. `token` must be valid UTF-8.
std::string decode(std::string_view token);

}  // namespace qmpi::byte_level
