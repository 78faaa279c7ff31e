// The tensor types of GGUF files (llama.cpp's ggml numbering, which the file format stores) and
// the block shape of each: the seam between the GGUF loader (io/, src/model) and the kernels
// that decode blocks inside their tiles (kernels/cpu, kernels/cuda).
//
// A quantized tensor of shape [rows, cols] (GGUF lists dimensions fastest first: ne0 = cols)
// is stored row by row; each row is cols / block_elems blocks of block_bytes bytes. A TP
// slice may cut rows anywhere but columns only on block edges.
#pragma once
#include <cstdint>
#include <string_view>

namespace qmpi {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // as llama.cpp prints it: "Q4_K", "BF16", "IQ2_XXS"
  int32_t block_elems;    // elements per block (1 for plain floats)
  int32_t block_bytes;    // bytes per block
  bool weights;           // qmpi loads weights of this type
};

// The type numbered `type` in a GGUF file; nullptr for a number the format does not define.
const GgmlTypeInfo* ggml_type_info(uint32_t type);

// The names of the types qmpi loads weights of, for error messages ("F32, F16, BF16, Q8_0, ...").
std::string_view ggml_weight_type_names();

// Bytes of `elems` elements (a multiple of the block) of `type`.
inline int64_t ggml_bytes(const GgmlTypeInfo& t, int64_t elems) {
  return elems / t.block_elems * t.block_bytes;
}

// A quantized (or plain-float) weight [rows, cols] in backend memory, rows `row_bytes` apart.
// W[r][c] decodes from block c / block_elems of row r.
struct GgmlWeightView {
  const uint8_t* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features, a multiple of the block
  int64_t row_bytes = 0;
};

}  // namespace qmpi
