// Streaming text that may hold a tag (<tool_call>, </think>) arrives in pieces: the end of one
// piece can be the start of the tag, so it is held back until more text decides.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string_view>

namespace qmpi {

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
inline size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace qmpi
