// Python's integer operators on the 64-bit integers templates compute with. Python's integers
// never overflow; these report a result outside int64 (2**1000, INT64_MIN // -1) as nullopt so
// the renderer fails with a template error rather than wrapping silently or trapping (SIGFPE).
#pragma once
#include <cstdint>
#include <optional>

namespace qmpi::jinja {

std::optional<int64_t> int_add(int64_t x, int64_t y);
std::optional<int64_t> int_sub(int64_t x, int64_t y);
std::optional<int64_t> int_mul(int64_t x, int64_t y);
std::optional<int64_t> int_neg(int64_t x);
// Floor division and the modulo with the divisor's sign, as Python's // and %. y != 0.
std::optional<int64_t> int_floordiv(int64_t x, int64_t y);
int64_t int_mod(int64_t x, int64_t y);
// x ** y for y >= 0, by squaring: O(log y) even for y = 10^18.
std::optional<int64_t> int_pow(int64_t x, int64_t y);

}  // namespace qmpi::jinja
