// SplitMix64: the golden-ratio increment and the finaliser, a bijective 64-bit mix whose outputs
// for consecutive inputs pass statistical tests. Hashes and counter-based random streams use it;
// its values must never change (synthetic weights and seeded sampling are compared across runs).
#pragma once
#include <cstdint>

namespace qmpi {

inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint64_t splitmix64(uint64_t x) {
  return mix64(x + kGoldenGamma);
}

}  // namespace qmpi
