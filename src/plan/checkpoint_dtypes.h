// Tensor dtypes of a Hugging Face model folder, read from the safetensors headers alone (the
// 8-byte length and the JSON after it), so `qmpi plan` works on a folder whose shards are still
// downloading or absent: their tensors keep the config's torch_dtype.
#pragma once
#include <map>
#include <string>

#include "core/dtype.h"

namespace qmpi {

// Empty for anything but a folder with model.safetensors or model.safetensors.index.json.
// Throws SafetensorsHeader (a present shard's header does not parse) or IndexInvalid.
std::map<std::string, DType> read_checkpoint_dtypes(const std::string& model_path);

}  // namespace qmpi
