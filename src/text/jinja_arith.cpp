#include "text/jinja_arith.h"

#include <limits>

namespace qmpi::jinja {

std::optional<int64_t> int_add(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> int_sub(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> int_mul(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> int_neg(int64_t x) {
  return int_sub(0, x);
}

std::optional<int64_t> int_floordiv(int64_t x, int64_t y) {
  if (x == std::numeric_limits<int64_t>::min() && y == -1) return std::nullopt;
  const int64_t q = x / y;
  return q - ((x % y != 0) && ((x < 0) != (y < 0)));
}

int64_t int_mod(int64_t x, int64_t y) {
  if (y == -1) return 0;  // INT64_MIN % -1 traps in C++; the answer is 0 for every x
  const int64_t r = x % y;
  // r and y differ in sign here, so r + y cannot overflow.
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

std::optional<int64_t> int_pow(int64_t x, int64_t y) {
  int64_t result = 1;
  std::optional<int64_t> base = x;
  while (y > 0) {
    if (!base) return std::nullopt;  // the base overflowed and is still needed
    if (y & 1) {
      auto r = int_mul(result, *base);
      if (!r) return std::nullopt;
      result = *r;
    }
    y >>= 1;
    if (y > 0) base = int_mul(*base, *base);
  }
  return result;
}

}  // namespace qmpi::jinja
