// Asserts that a call raises the catalogue error `code` and that its message names each needle
// (the file, the tensor, the numbers): the shape every corrupt-input test checks.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "core/errors.h"

namespace qmpi::testing {

template <class Fn>
void expect_error(Fn fn, Err code, std::initializer_list<std::string> needles) {
  try {
    fn();
    FAIL() << "no error raised, expected " << error_id(code);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    for (const auto& n : needles)
      EXPECT_NE(e.message().find(n), std::string::npos)
          << "message lacks '" << n << "': " << e.message();
  }
}

}  // namespace qmpi::testing
