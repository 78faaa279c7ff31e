// Block decoders of the GGUF weight types (core/ggml_types.h): one block, or a run of blocks, to
// float32. Written from the block layouts of the GGUF/ggml format; the arithmetic is the format's
// own (the super-block scale times the sub-block scale in float32, then times the quant, less
// the min), so a weight decodes to the float32 value llama.cpp's reader gives it.
#pragma once
#include <cstdint>

#include "core/ggml_types.h"

namespace qmpi::cpu {

// The largest block of any weight type (the k-quants' 256-element super-block).
inline constexpr int kGgmlMaxBlockElems = 256;

// dst[0, n) = the n elements (a multiple of the type's block) stored from `src`. `type` must be
// a weight type (GgmlTypeInfo::weights); the caller checks.
void dequantize_ggml_row(GgmlType type, const uint8_t* src, float* dst, int64_t n);

// One block of `type` (block_elems elements of GgmlTypeInfo) to dst.
void dequantize_ggml_block(GgmlType type, const uint8_t* block, float* dst);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, from its 12 packed
// scale bytes: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split into a low nibble of
// byte j + 4 and the top two bits of bytes j - 4 (scale) and j (min).
inline void k_quant_scale_min(const uint8_t* s, int j, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = uint8_t((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    min = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q3_K's 6-bit scale of sub-block j (0..15), stored + 32 in 12 bytes: the low nibbles of
// sub-blocks 0..7 and 8..15 are the low and high nibbles of bytes 0..7; the top two bits of
// sub-block j are bits 2 (j / 4) of byte 8 + j % 4.
inline int q3_k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | hi << 4) - 32;
}

}  // namespace qmpi::cpu
