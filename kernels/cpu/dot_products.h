// Which hardware dot products this build's CPU kernels use (chosen by -march=native at compile
// time): bf16 pairs (AVX512-BF16's VDPBF16PS), int8 quads (AVX512-VNNI's VPDPBUSD with BW and
// VL, or AVX2's VPMADDUBSW and VPMADDWD, the same sums in two instructions) and int16 pairs
// (VPMADDWD). Where one is missing, the paths that exist only for its speed give way to their
// exact float32 twins: without bf16 dot products the bf16 decode attention, the int4 bf16
// tiles and the FP8 GEMV's bf16 route (BF16 weights, and FP8 ones in the blocked GEMM, under
// bf16 activations still see x rounded, so their numbers do not depend on the CPU); without int8
// dot products the GGUF int8-activation GEMV; without int16 ones the int4 int16-activation GEMV. So
// `--dtype auto` gives different numbers on builds for different CPUs, and `qmpi --version` prints
// dot_products_summary() for comparing hosts.
#pragma once
#include <string>

namespace qmpi::cpu {

#if defined(__AVX512BF16__)
inline constexpr bool kHaveBf16Dot = true;
#else
inline constexpr bool kHaveBf16Dot = false;
#endif

#if (defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
     defined(__AVX512VNNI__)) ||                                               \
    (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVX512F__))
#define QMPI_CPU_INT8_DOT 1  // for the #if around code that only compiles with the intrinsics
inline constexpr bool kHaveInt8Dot = true;
#else
inline constexpr bool kHaveInt8Dot = false;
#endif

// int16 pairs for the int4 GEMV's activations: AVX2's VPMADDWD, AVX-512's VPDPWSSD (VNNI; with
// BW alone VPMADDWD on 512-bit registers).
#if (defined(__AVX512F__) && defined(__AVX512BW__)) || \
    (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVX512F__))
#define QMPI_CPU_INT16_DOT 1
inline constexpr bool kHaveInt16Dot = true;
#else
inline constexpr bool kHaveInt16Dot = false;
#endif

inline std::string dot_products_summary() {
  return std::string("cpu kernels: bf16 dot products ") + (kHaveBf16Dot ? "yes" : "no") +
         ", int8 dot products " + (kHaveInt8Dot ? "yes" : "no") + ", int16 dot products " +
         (kHaveInt16Dot ? "yes" : "no");
}

}  // namespace qmpi::cpu
