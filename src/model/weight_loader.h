// Reads this rank's slice of named checkpoint tensors into backend memory, checking each one's
// presence, dtype and shape against the config first (catalogue errors name the tensor and
// file). Every model family's weight file loads through it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/weight_source.h"
#include "model/config.h"
#include "model/linear.h"
#include "model/shard_plan.h"

namespace qmpi {

class WeightLoader {
 public:
  WeightLoader(const ModelConfig& cfg, const ShardPlan& plan, WeightSource& src, Backend& be)
      : cfg_(cfg), plan_(plan), src_(src), be_(be) {}

  // Loads `name`, whose full (unsliced) shape must be `shape`, sliced per the shard plan.
  Weight load(const std::string& name, const std::vector<int64_t>& shape);

  // Loads the linear `prefix` ("model.layers.3.self_attn.q_proj"): its full shape is
  // [out_features, in_features]; `bias` adds prefix.bias [out_features].
  Linear load_linear(const std::string& prefix, int64_t out_features, int64_t in_features,
                     bool bias = false);

  // GGUF: `name` (full shape `shape`) in its blocks, sliced per the shard plan, when it is
  // block-quantized and the slice keeps whole blocks; else an empty GgmlWeight.
  GgmlWeight load_blocks(const std::string& name, const std::vector<int64_t>& shape);

  // Weight bytes loaded so far (what this rank holds).
  uint64_t bytes() const { return bytes_; }

 private:
  // `name`'s info, checked: a dtype qmpi computes from (or GGUF blocks) and the shape `shape`.
  const TensorInfo& checked(const std::string& name, const std::vector<int64_t>& shape) const;
  Slice slice_of(const std::string& name) const;

  const ModelConfig& cfg_;
  const ShardPlan& plan_;
  WeightSource& src_;
  Backend& be_;
  uint64_t bytes_ = 0;
};

// "[2, 3]"
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace qmpi
