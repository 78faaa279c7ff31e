// Levenshtein distance, for "did you mean" suggestions (request fields, command-line flags).
#pragma once
#include <cstddef>
#include <string_view>

namespace qmpi {

// Insertions, deletions and substitutions that turn `a` into `b`.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace qmpi
