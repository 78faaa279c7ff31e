// Which float32 activation the backend's bf16 copy holds. The ops whose output is the next
// GEMM's input (rmsnorm, add_rmsnorm, silu_mul) write, next to their float32 output, its
// rounding to bf16 into the GEMM's input scratch; a matmul whose x is exactly that output then
// multiplies the copy instead of converting x again (the fp32 -> bf16 round trip before every
// GEMM). The copy is used only when the same array (pointer and element count) is asked for and
// nothing has written device memory since it was made (device_writes.h): any other write, by
// any op or comm, may have changed the floats, so it ends the copy's validity.
#pragma once
#include <cstdint>

namespace qmpi::cuda {

class Bf16Handoff {
 public:
  // x[count] and its bf16 copy were written by the op that bumped the generation to `gen`.
  void stage(const float* x, int64_t count, uint64_t gen) {
    x_ = x;
    count_ = count;
    gen_ = gen;
  }
  // True when the copy is x[count]'s and `gen` (the current generation) is the one it was
  // made at.
  bool holds(const float* x, int64_t count, uint64_t gen) const {
    return x_ != nullptr && x == x_ && count == count_ && gen == gen_;
  }

 private:
  const float* x_ = nullptr;
  int64_t count_ = 0;
  uint64_t gen_ = 0;
};

}  // namespace qmpi::cuda
