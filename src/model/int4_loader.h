// Reads one int4 projection of an AWQ or GPTQ checkpoint (prefix.qweight, .qzeros, .scales and,
// for GPTQ, .g_idx), this rank's slice only, checks every tensor against the config and unpacks
// it into the backends' layout (model/int4_weight.h).
#pragma once
#include <cstdint>
#include <string>

#include "io/weight_source.h"
#include "model/config.h"
#include "model/int4_weight.h"

namespace qmpi {

// `slice` is the shard plan's slice of prefix.weight ([out_features, in_features]): dim 0 for
// the output rows of a column-parallel projection, dim 1 for the input rows of a row-parallel
// one. Throws Error(QuantTensorInvalid) when a tensor's dtype, shape or g_idx values disagree
// with the config, TensorMissing when one is absent.
Int4Unpacked read_int4_linear(const ModelConfig& cfg, WeightSource& src, const std::string& prefix,
                              int64_t out_features, int64_t in_features, const Slice& slice);

}  // namespace qmpi
