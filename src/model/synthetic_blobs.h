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

}  // namespace qmpi
