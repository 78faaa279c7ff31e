// Which hardware dot products this build's CPU kernels use (chosen by -march=native at compile
// time): bf16 pairs (AVX512-BF16's VDPBF16PS) and int8 quads (AVX512-VNNI with BW and VL). Where
// one is missing, the paths that exist only for its speed give way to their exact float32 twins:
// without bf16 dot products the bf16 decode attention and the FP8 and int4 bf16 tiles (BF16 weights
// under bf16 activations still see x rounded, so their numbers do not depend on the CPU); without
// int8 dot products the GGUF int8-activation GEMV. So `--dtype auto` gives different numbers on
// builds for different CPUs, and `qmpi --version` prints summary() for comparing hosts.
#pragma once

namespace qmpi::cpu {

#if defined(__AVX512BF16__)
inline constexpr bool kHaveBf16Dot = true;
#else
inline constexpr bool kHaveBf16Dot = false;
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define QMPI_CPU_INT8_DOT 1  // for the #if around code that only compiles with the intrinsics
inline constexpr bool kHaveInt8Dot = true;
#else
inline constexpr bool kHaveInt8Dot = false;
#endif

// "cpu kernels: bf16 dot products yes|no, int8 dot products yes|no"
inline const char* dot_products_summary() {
  static constexpr const char* kLines[2][2] = {
      {"cpu kernels: bf16 dot products no, int8 dot products no",
       "cpu kernels: bf16 dot products no, int8 dot products yes"},
      {"cpu kernels: bf16 dot products yes, int8 dot products no",
       "cpu kernels: bf16 dot products yes, int8 dot products yes"}};
  return kLines[kHaveBf16Dot][kHaveInt8Dot];
}

}  // namespace qmpi::cpu
