// x86 intrinsics for the vector kernels (each use guarded by the matching __AVX512F__ /
// __AVX512BF16__ / __F16C__ macro, with a portable path beside it). Include it from kernel
// sources only: it silences a warning for the rest of the translation unit.
#pragma once
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

// GCC 12.2's own headers trip -W(maybe-)uninitialized on every inlined AVX-512 intrinsic that
// starts from _mm512_undefined_* (GCC bug 105593, fixed in 12.3); the warnings are noise.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
