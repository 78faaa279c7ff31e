// A hash map keyed by std::string that can be searched with a std::string_view, so lookups of
// pieces of a larger text need no temporary string.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace qmpi {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename V>
using StringMap = std::unordered_map<std::string, V, StringViewHash, std::equal_to<>>;

}  // namespace qmpi
