// The checks every backend's GGUF matmul makes before it reads a block (a weight type with a
// kernel, whole blocks per row, a bias as long as the output), and the plain-float case both
// hand to their dense kernels.
#pragma once
#include <optional>
#include <string>

#include "core/errors.h"
#include "core/ggml_types.h"
#include "kernels/kernel_types.h"

namespace qmpi {

// The weight's type, after the checks (raising a qmpi::Error).
inline const GgmlTypeInfo& check_ggml_matmul(const GgmlWeightView& w, const WeightView* bias) {
  const GgmlTypeInfo* t = ggml_type_info(uint32_t(w.type));
  if (!t || !t->weights)
    raise(Err::Internal, "gguf matmul got weight type " +
                             (t ? std::string(t->name) : std::to_string(uint32_t(w.type))) +
                             ", which has no kernel (kernels decode " +
                             std::string(ggml_weight_type_names()) + ")");
  if (!w.data || w.rows < 0 || w.cols < 0 || w.cols % t->block_elems != 0 ||
      w.row_bytes < ggml_bytes(*t, w.cols))
    raise(Err::Internal, "gguf matmul weight of " + std::to_string(w.rows) + "x" +
                             std::to_string(w.cols) + " " + std::string(t->name) + " with rows " +
                             std::to_string(w.row_bytes) + " bytes apart is not whole blocks of " +
                             std::to_string(t->block_elems) + " elements in " +
                             std::to_string(t->block_bytes) + " bytes");
  if (bias && (!is_float_weight(bias->dtype) || bias->rows * bias->cols != w.rows))
    raise(Err::TensorShapeMismatch,
          "gguf matmul bias has " + std::to_string(bias->rows * bias->cols) +
              " elements for a weight with " + std::to_string(w.rows) + " output rows");
  return *t;
}

// The dense weight a plain-float GGUF weight in whole rows is (F32/F16/BF16, rows packed), for
// the float kernels to serve; nullopt for blocks and for column slices.
inline std::optional<WeightView> ggml_as_dense(const GgmlWeightView& w, const GgmlTypeInfo& t) {
  if (t.block_elems != 1 || w.row_bytes != ggml_bytes(t, w.cols)) return std::nullopt;
  const DType d = w.type == GgmlType::F32   ? DType::F32
                  : w.type == GgmlType::F16 ? DType::F16
                                            : DType::BF16;
  return WeightView{w.data, d, w.rows, w.cols, nullptr};
}

}  // namespace qmpi
