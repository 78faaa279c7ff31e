// Unicode NFC, the only normalizer Qwen's tokenizer.json uses, through utf8proc.
#pragma once
#include <string>
#include <string_view>

namespace qmpi {

// `text` must be valid UTF-8 (embedded NULs are fine).
std::string nfc(std::string_view text);

}  // namespace qmpi
