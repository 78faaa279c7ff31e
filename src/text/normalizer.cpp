#include "text/normalizer.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "core/errors.h"

namespace qmpi {
namespace {

// Text made only of code points below U+0300 (the first combining mark) is already in NFC:
// nothing there decomposes into something that recomposes differently.
bool trivially_nfc(std::string_view text) {
  for (char c : text) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0xCC) return false;  // lead bytes of U+0300 and above
  }
  return true;
}

}  // namespace

std::string nfc(std::string_view text) {
  if (trivially_nfc(text)) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) raise(Err::Internal, std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace qmpi
