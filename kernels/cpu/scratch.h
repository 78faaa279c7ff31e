// Per-thread scratch arrays that outlive the call: a decode step runs ~170 matmuls, and a fresh
// allocation of a few hundred KiB in each is a fresh mmap whose pages fault in on first touch
// (10-20% of a batched decode pass under perf). The buffer grows to the largest request a
// thread has made and is reused from then on.
#pragma once
#include <cstddef>

#include "kernels/cpu/aligned.h"

namespace qmpi::cpu {

// `count` elements of the calling thread's scratch array number `Slot` (distinct slots are
// distinct arrays, so one kernel can hold several); contents are unspecified. Valid until the
// same thread asks for the same slot again.
template <class T, int Slot>
T* thread_scratch(size_t count) {
  thread_local AlignedArray<T> buf;
  thread_local size_t capacity = 0;
  if (count > capacity || !buf) {
    buf = make_aligned<T>(count);
    capacity = count;
  }
  return buf.get();
}

}  // namespace qmpi::cpu
