// Each decoder walks its block in element order; the byte offsets are those of the format's
// block structs (little-endian f16 scales, packed quants).
#include "kernels/cpu/ggml_dequant.h"

#include <cstring>

#include "core/dtype.h"
#include "kernels/cpu/convert.h"

namespace qmpi::cpu {
namespace {

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_f32(h);
}

// Q4_0 / Q4_1: 32 nibbles; byte i holds element i (low) and i + 16 (high).
void q4(const uint8_t* b, float* y, bool has_min) {
  const float d = f16_at(b);
  const float m = has_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* qs = b + (has_min ? 4 : 2);
  const int bias = has_min ? 0 : 8;
  for (int i = 0; i < 16; ++i) {
    y[i] = float((qs[i] & 0x0f) - bias) * d + m;
    y[i + 16] = float((qs[i] >> 4) - bias) * d + m;
  }
}

// Q5_0 / Q5_1: Q4's nibbles plus a fifth bit per element, bit i of the 32-bit qh for element i.
void q5(const uint8_t* b, float* y, bool has_min) {
  const float d = f16_at(b);
  const float m = has_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (has_min ? 4 : 2);
  const uint32_t qh =
      uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  const uint8_t* qs = p + 4;
  const int bias = has_min ? 0 : 16;
  for (int i = 0; i < 16; ++i) {
    const int lo = (qs[i] & 0x0f) | int((qh >> i) & 1) << 4;
    const int hi = (qs[i] >> 4) | int((qh >> (i + 16)) & 1) << 4;
    y[i] = float(lo - bias) * d + m;
    y[i + 16] = float(hi - bias) * d + m;
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = float(qs[i]) * d;
}

// The 2- and 3-bit k-quants share one walk: element e = 128 h + 32 j + l (h the half, j the
// 2-bit plane, l < 32) is bits 2j..2j+1 of qs[32 h + l]; its 16-element sub-block is e / 16.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e / 32) % 4, l = e % 32;
    const uint8_t sc = scales[e / 16];
    const int q = (qs[32 * h + l] >> (2 * j)) & 3;
    y[e] = d * float(sc & 0x0f) * float(q) - dmin * float(sc >> 4);
  }
}

// A 3-bit quant is Q2_K's 2-bit plane plus bit (4 h + j) of hmask[l]; a clear bit means 4 less.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  const float d = f16_at(b + 108);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e / 32) % 4, l = e % 32;
    const int q = ((qs[32 * h + l] >> (2 * j)) & 3) - ((hmask[l] >> (4 * h + j)) & 1 ? 0 : 4);
    y[e] = d * float(q3_k_scale(scales, e / 16)) * float(q);
  }
}

// Q4_K / Q5_K: eight 32-element sub-blocks; sub-blocks 2 p and 2 p + 1 are the low and high
// nibbles of qs[32 p .. 32 p + 32); Q5_K's fifth bit of element l of sub-block s is bit s of
// qh[l].
void q45_k(const uint8_t* b, float* y, bool five) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (five ? 48 : 16);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, mn;
    k_quant_scale_min(scales, s, sc, mn);
    const float ds = d * float(sc), ms = dmin * float(mn);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0x0f) | (five ? ((qh[l] >> s) & 1) << 4 : 0);
      y[32 * s + l] = ds * float(v) - ms;
    }
  }
}

// Q6_K: element e = 128 h + 32 k + l (k < 4, l < 32) has its low nibble in ql[64 h + l + 32 (k %
// 2)] (low half for k < 2, high for k >= 2) and its top two bits at bits 2k of qh[32 h + l];
// stored +32, with an int8 scale per 16 elements.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, k = (e / 32) % 4, l = e % 32;
    const int lo = (ql[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 0x0f;
    const int hi = (qh[32 * h + l] >> (2 * k)) & 3;
    y[e] = d * float(scales[e / 16]) * float((lo | hi << 4) - 32);
  }
}

}  // namespace

void dequantize_ggml_block(GgmlType type, const uint8_t* b, float* y) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(y, b, 4);
      return;
    case GgmlType::F16:
      *y = f16_at(b);
      return;
    case GgmlType::BF16: {
      uint16_t h;
      std::memcpy(&h, b, 2);
      *y = bf16_to_f32(h);
      return;
    }
    case GgmlType::Q4_0:
      return q4(b, y, false);
    case GgmlType::Q4_1:
      return q4(b, y, true);
    case GgmlType::Q5_0:
      return q5(b, y, false);
    case GgmlType::Q5_1:
      return q5(b, y, true);
    case GgmlType::Q8_0:
      return q8_0(b, y);
    case GgmlType::Q2_K:
      return q2_k(b, y);
    case GgmlType::Q3_K:
      return q3_k(b, y);
    case GgmlType::Q4_K:
      return q45_k(b, y, false);
    case GgmlType::Q5_K:
      return q45_k(b, y, true);
    case GgmlType::Q6_K:
      return q6_k(b, y);
    default:
      return;  // not a weight type: the callers' checks keep these out
  }
}

void dequantize_ggml_row(GgmlType type, const uint8_t* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case GgmlType::F16:
      return convert_to_f32(src, DType::F16, n, dst);
    case GgmlType::BF16:
      return convert_to_f32(src, DType::BF16, n, dst);
    default:
      break;
  }
  const GgmlTypeInfo& t = *ggml_type_info(uint32_t(type));
  for (int64_t i = 0; i < n / t.block_elems; ++i)
    dequantize_ggml_block(type, src + i * t.block_bytes, dst + i * t.block_elems);
}

}  // namespace qmpi::cpu
