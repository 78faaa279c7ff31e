#include "core/ggml_types.h"

#include <array>

namespace qmpi {
namespace {

// Block sizes from the GGUF format documentation (ggml's block structs): 32-element blocks with
// an f16 scale (and min, and high bits), 256-element k-quant super-blocks.
constexpr std::array kTypes{
    GgmlTypeInfo{GgmlType::F32, "F32", 1, 4, true},
    GgmlTypeInfo{GgmlType::F16, "F16", 1, 2, true},
    GgmlTypeInfo{GgmlType::Q4_0, "Q4_0", 32, 18, true},
    GgmlTypeInfo{GgmlType::Q4_1, "Q4_1", 32, 20, true},
    GgmlTypeInfo{GgmlType::Q5_0, "Q5_0", 32, 22, true},
    GgmlTypeInfo{GgmlType::Q5_1, "Q5_1", 32, 24, true},
    GgmlTypeInfo{GgmlType::Q8_0, "Q8_0", 32, 34, true},
    GgmlTypeInfo{GgmlType::Q8_1, "Q8_1", 32, 36, false},
    GgmlTypeInfo{GgmlType::Q2_K, "Q2_K", 256, 84, true},
    GgmlTypeInfo{GgmlType::Q3_K, "Q3_K", 256, 110, true},
    GgmlTypeInfo{GgmlType::Q4_K, "Q4_K", 256, 144, true},
    GgmlTypeInfo{GgmlType::Q5_K, "Q5_K", 256, 176, true},
    GgmlTypeInfo{GgmlType::Q6_K, "Q6_K", 256, 210, true},
    GgmlTypeInfo{GgmlType::Q8_K, "Q8_K", 256, 292, false},
    GgmlTypeInfo{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, false},
    GgmlTypeInfo{GgmlType::IQ2_XS, "IQ2_XS", 256, 74, false},
    GgmlTypeInfo{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, false},
    GgmlTypeInfo{GgmlType::IQ1_S, "IQ1_S", 256, 50, false},
    GgmlTypeInfo{GgmlType::IQ4_NL, "IQ4_NL", 32, 18, false},
    GgmlTypeInfo{GgmlType::IQ3_S, "IQ3_S", 256, 110, false},
    GgmlTypeInfo{GgmlType::IQ2_S, "IQ2_S", 256, 82, false},
    GgmlTypeInfo{GgmlType::IQ4_XS, "IQ4_XS", 256, 136, false},
    GgmlTypeInfo{GgmlType::I8, "I8", 1, 1, false},
    GgmlTypeInfo{GgmlType::I16, "I16", 1, 2, false},
    GgmlTypeInfo{GgmlType::I32, "I32", 1, 4, false},
    GgmlTypeInfo{GgmlType::I64, "I64", 1, 8, false},
    GgmlTypeInfo{GgmlType::F64, "F64", 1, 8, false},
    GgmlTypeInfo{GgmlType::IQ1_M, "IQ1_M", 256, 56, false},
    GgmlTypeInfo{GgmlType::BF16, "BF16", 1, 2, true},
    GgmlTypeInfo{GgmlType::TQ1_0, "TQ1_0", 256, 54, false},
    GgmlTypeInfo{GgmlType::TQ2_0, "TQ2_0", 256, 66, false},
    GgmlTypeInfo{GgmlType::MXFP4, "MXFP4", 32, 17, false},
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  for (const GgmlTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == type) return &t;
  return nullptr;
}

std::string_view ggml_weight_type_names() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
}

}  // namespace qmpi
