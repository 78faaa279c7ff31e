#include "serve/api_key.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/errors.h"

namespace qmpi {
namespace {

// A key file written by `echo KEY > file` ends with a newline; that is not part of the key.
std::string trimmed(std::string s) {
  const auto space = [](unsigned char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  };
  while (!s.empty() && space(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t start = 0;
  while (start < s.size() && space(static_cast<unsigned char>(s[start]))) ++start;
  return s.substr(start);
}

void check_key(const std::string& key, const std::string& source) {
  // It goes into an HTTP header comparison: a space or a control byte can never match.
  const bool printable = std::all_of(key.begin(), key.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u > 0x20 && u != 0x7f;
  });
  if (!printable)
    raise(Err::Usage, "the API key from " + source + " has spaces or control characters in it",
          "Use a key of printable characters without spaces (e.g. `openssl rand -hex 24`).");
}

}  // namespace

std::string resolve_api_key(const ApiKeySources& from) {
  if (!from.option.empty() && !from.file.empty())
    raise(Err::Usage, "give --api-key or --api-key-file, not both");
  std::string key, source;
  if (!from.file.empty()) {
    std::ifstream in(from.file, std::ios::binary);
    if (!in)
      raise(Err::Usage, "cannot read --api-key-file " + from.file,
            "Check the path and its permissions (the file needs to be readable by qmpi only).");
    std::stringstream ss;
    ss << in.rdbuf();
    key = trimmed(ss.str());
    source = "--api-key-file " + from.file;
    if (key.empty()) raise(Err::Usage, "--api-key-file " + from.file + " is empty");
  } else if (!from.option.empty()) {
    key = from.option;
    source = "--api-key";
  } else if (from.env != nullptr && *from.env != '\0') {
    key = trimmed(from.env);
    source = "QMPI_API_KEY";
  }
  if (!key.empty()) check_key(key, source);
  return key;
}

bool api_key_matches(std::string_view given, std::string_view key) {
  if (given.size() != key.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

}  // namespace qmpi
