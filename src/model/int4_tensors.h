// The tensors a quantized checkpoint stores for each quantized projection (int4: qweight,
// qzeros, scales, g_idx in place of `.weight`, facts sheet §6; FP8: an e4m3 `.weight` and its
// `.weight_scale_inv`), with their shapes and dtypes: what doctor checks a checkpoint against.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace qmpi {

// True for the decoder projections AWQ and GPTQ quantize ("model.layers.N.*_proj.weight").
bool is_quantized_projection(const std::string& weight_name);

struct CheckpointTensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<DType> dtype;  // the exact dtype of an int4 part; none: any float dtype
};

// expected_tensors(cfg), each quantized projection replaced by its qweight, qzeros, scales
// (and GPTQ's g_idx), or by its e4m3 weight and block scales, when cfg.quant says so.
std::vector<CheckpointTensorSpec> checkpoint_tensors(const ModelConfig& cfg);

}  // namespace qmpi
