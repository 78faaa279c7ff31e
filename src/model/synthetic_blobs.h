// The tensors of a random quantized test model (make-model --quant) as byte blobs, and the
// writer that lays a list of them out as a Hugging Face folder (shards, index, config): shared by
// the int4 and FP8 writers.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/config.h"
#include "model/synthetic_checkpoint.h"

namespace qmpi {

// A tensor to write: its bytes, made when its shard is written.
struct Blob {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <class T>
inline Blob blob(std::string name, DType dtype, std::vector<int64_t> shape,
                 const std::vector<T>& v) {
  Blob b{std::move(name), dtype, std::move(shape), {}};
  b.bytes.resize(v.size() * sizeof(T));
  std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}

// Writes one model: entry e of `specs` becomes the tensors make(e) returns, in `shards` files
// of consecutive entries.
CheckpointSummary write_blob_model(const std::string& dir, const nlohmann::json& config,
                                   const std::vector<TensorSpec>& specs, int shards,
                                   const std::function<std::vector<Blob>(const TensorSpec&)>& make,
                                   const ModelConfig& cfg);

// The dense generator's tensor `t` as `dtype` (what write_synthetic_checkpoint writes).
Blob dense_blob(uint64_t seed, const TensorSpec& t, DType dtype);

// How a quantized projection (is_quantized_projection) is written: its stored tensors, and the
// same values as one float tensor for the dequantized twin.
struct QuantizedBlobs {
  std::function<std::vector<Blob>(const TensorSpec&)> stored;
  std::function<Blob(const TensorSpec&)> dequantized;
};

// Writes a quantized model to `dir` and, unless float_dir is empty, its dequantized twin there
// (config without quantization_config): the float reference the quantized loaders are checked
// against. Every other tensor is dense_blob(seed, t, dense_dtype) in both.
CheckpointSummary write_quantized_model(const std::string& dir, const nlohmann::json& config,
                                        const std::vector<TensorSpec>& specs, int shards,
                                        const ModelConfig& cfg, uint64_t seed, DType dense_dtype,
                                        const QuantizedBlobs& q, const std::string& float_dir);

}  // namespace qmpi
