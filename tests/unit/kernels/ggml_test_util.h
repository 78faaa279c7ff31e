// Random GGUF weights of every weight type for the kernel tests (CPU and CUDA): random bytes with
// finite f16 scales (quantized types) or normal values (plain floats).
#pragma once
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace qmpi::test {

inline constexpr GgmlType kGgmlTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
    GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

// Byte offsets of each block's f16 scales, set to finite values; every other byte is random.
inline std::vector<int> scale_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q6_K:
      return {208};
    default:
      return {0};
  }
}

struct HostGgml {
  std::vector<uint8_t> bytes;
  GgmlWeightView v;
};

inline HostGgml random_ggml(GgmlType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const GgmlTypeInfo& info = *ggml_type_info(uint32_t(t));
  const int64_t row_bytes = ggml_bytes(info, cols);
  HostGgml h{std::vector<uint8_t>(size_t(rows * row_bytes)), {}};
  if (info.block_elems == 1) {
    const std::vector<float> v = random_floats(size_t(rows * cols), rng);
    for (size_t i = 0; i < v.size(); ++i) {
      if (t == GgmlType::F32) {
        std::memcpy(h.bytes.data() + 4 * i, &v[i], 4);
      } else {
        const uint16_t b = t == GgmlType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
        std::memcpy(h.bytes.data() + 2 * i, &b, 2);
      }
    }
  } else {
    for (uint8_t& b : h.bytes) b = uint8_t(rng() & 0xff);
    std::uniform_real_distribution<float> s(-0.02f, 0.02f);
    for (int64_t at = 0; at < int64_t(h.bytes.size()); at += info.block_bytes)
      for (int off : scale_fields(t)) {
        const uint16_t f = f32_to_f16(s(rng));
        std::memcpy(h.bytes.data() + at + off, &f, 2);
      }
  }
  h.v = {h.bytes.data(), t, rows, cols, row_bytes};
  return h;
}

}  // namespace qmpi::test
