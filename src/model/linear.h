// One nn.Linear of a decoder layer as this rank holds it: the weight slice the shard plan gives
// it (column- or row-parallel) and, for column-parallel projections that have one, the bias
// slice. Blocks call forward() and never look at the storage, so a dense checkpoint and a
// quantized one (the int4 formats, block-wise FP8, GGUF blocks) are the same Linear to them.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/fp8_weight.h"
#include "model/ggml_weight.h"
#include "model/int4_weight.h"
#include "model/lora_weight.h"

namespace qmpi {

struct Linear {
  Weight weight;    // dense: [out_features, in_features], dtype Backend::matrix_dtype(file's)
  Int4Weight int4;  // int4 (AWQ / GPTQ) checkpoints instead of `weight`
  Fp8Weight fp8;    // block-wise FP8 checkpoints instead of `weight`
  GgmlWeight ggml;  // block-quantized GGUF tensors instead of `weight`
  Weight bias;      // [out_features] or empty
  // LoRA adapters by index (--lora-modules order), this rank's slices; an empty entry: that
  // adapter leaves this projection alone. Applied per row group (model/lora_delta.h), never
  // merged into `weight`.
  std::vector<LoraWeight> lora;

  // out[n, out_features] = x[n, in_features] . W^T (+ bias), accumulated in float32. Only a
  // dense weight's GEMM reads x's rounded copy; the quantized kernels read x.x.
  void forward(Backend& be, const GemmInput& x, int64_t n, float* out) const;
  // The dtype the backend's GEMM reads this projection's input in (Backend::gemm_input_dtype):
  // what the op writing that input is asked to round a copy to. F32 for quantized weights.
  DType input_dtype(const Backend& be) const {
    return weight ? be.gemm_input_dtype(weight.dtype) : DType::F32;
  }

  int64_t out_features() const {
    return int4 ? int4.rows() : fp8 ? fp8.rows() : ggml ? ggml.rows() : weight.rows;
  }
  int64_t in_features() const {
    return int4 ? int4.in_features : fp8 ? fp8.cols() : ggml ? ggml.cols : weight.cols;
  }
  explicit operator bool() const { return weight || int4 || fp8 || ggml; }
};

// One projection of a group that reads the same x (q/k/v, gate/up) and where it writes.
struct LinearOut {
  const Linear* linear;
  float* out;
};

// Every projection of the group applied to x[n, in_features]: one backend group call (one pass
// over the weights, one barrier) when all are dense, all FP8 or all int4, else forward() one by
// one (the GGUF kernels take no groups).
void forward_group(Backend& be, const GemmInput& x, int64_t n, std::span<const LinearOut> group);

}  // namespace qmpi
