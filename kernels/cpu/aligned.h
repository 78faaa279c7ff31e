// Cache-line-aligned scratch arrays for the CPU kernels (packed panels, converted rows).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace qmpi::cpu {

inline constexpr size_t kCacheLine = 64;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

template <class T>
using AlignedArray = std::unique_ptr<T[], AlignedFree>;

// Uninitialised storage for `count` elements, 64-byte aligned; never null (count 0 gets one line).
template <class T>
AlignedArray<T> make_aligned(size_t count) {
  size_t bytes = (count * sizeof(T) + kCacheLine - 1) / kCacheLine * kCacheLine;
  if (bytes == 0) bytes = kCacheLine;
  void* p = std::aligned_alloc(kCacheLine, bytes);
  if (!p) throw std::bad_alloc();
  return AlignedArray<T>(static_cast<T*>(p));
}

}  // namespace qmpi::cpu
