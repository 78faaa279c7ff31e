// Whether this build's CPU target multiplies bf16 pairs in hardware (AVX512-BF16's VDPBF16PS,
// chosen by -march=native). Where it does not, the paths that round to bf16 only for speed (the
// bf16 decode attention, the FP8 and int4 bf16 tiles) give way to their exact float32 twins; BF16
// weights under bf16 activations still see x rounded, so their numbers do not depend on the CPU.
#pragma once

namespace qmpi::cpu {

#if defined(__AVX512BF16__)
inline constexpr bool kHaveBf16Dot = true;
#else
inline constexpr bool kHaveBf16Dot = false;
#endif

}  // namespace qmpi::cpu
