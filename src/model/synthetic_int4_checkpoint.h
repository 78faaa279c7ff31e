// `qmpi make-model --quant awq|gptq`: a random-weight int4 model in the exact Hugging Face
// layout of AutoAWQ (GEMM) or AutoGPTQ ("gptq" format) checkpoints, plus, on request, the float
// model it dequantizes to (the same tensors with every int4 projection as an F32 .weight), so
// tests can hold the int4 path to the float path and to the reference's own unpacking.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/quant_config.h"
#include "model/synthetic_checkpoint.h"

namespace qmpi {

struct Int4ModelOptions {
  QuantMethod method = QuantMethod::Awq;
  int64_t group_size = 128;  // -1: one group over each projection's inputs
  bool desc_act = false;     // GPTQ act-order: a random permutation decides each row's group
  bool sym = false;          // GPTQ symmetric: every zero point is 8
};

// The quantization_config AutoAWQ / AutoGPTQ write for `opt`.
nlohmann::json quantization_config_json(const Int4ModelOptions& opt);

// Writes the int4 model into `dir` (torch_dtype float16; other tensors F16 from the same
// generator as write_synthetic_checkpoint) and, when `float_dir` is not empty, its dequantized
// float twin there. Shards and files as write_synthetic_checkpoint. Throws Error(Usage) for
// options the format cannot hold, QuantUnsupported when the shape does not pack.
CheckpointSummary write_synthetic_int4_checkpoint(const std::string& dir,
                                                  nlohmann::json config_json, uint64_t seed,
                                                  const Int4ModelOptions& opt, int shards,
                                                  const std::string& float_dir);

}  // namespace qmpi
