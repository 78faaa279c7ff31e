// Compiles a constraint over a byte vocabulary (ids 0-255 are the single bytes) and asks
// whether texts match it completely.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "constrain/compiled_constraint.h"
#include "constrain/constraint_source.h"

namespace qmpi::testing_constrain {

inline std::shared_ptr<const VocabIndex> byte_vocab() {
  static const auto v = [] {
    std::vector<std::string> bytes(256);
    for (int b = 0; b < 256; ++b) bytes[size_t(b)] = std::string(1, char(b));
    return std::make_shared<const VocabIndex>(bytes, 256);
  }();
  return v;
}

inline std::shared_ptr<CompiledConstraint> compile(ConstraintKind kind, const std::string& text) {
  return std::make_shared<CompiledConstraint>(compile_grammar({kind, text}), byte_vocab());
}

}  // namespace qmpi::testing_constrain
