// Tensor dtypes of a Hugging Face model folder, read from the safetensors headers alone (the
// 8-byte length and the JSON after it), so `qmpi plan` works on a folder whose shards are still
// downloading or absent: their tensors keep the config's torch_dtype. A GGUF file's types come
// from its tensor list.
#pragma once
#include <map>
#include <string>

#include "core/dtype.h"
#include "core/ggml_types.h"

namespace qmpi {

// Empty for anything but a folder with model.safetensors or model.safetensors.index.json, or a
// GGUF file (its F32/F16/BF16 tensors, by Hugging Face names). Throws SafetensorsHeader (a
// present shard's header does not parse), IndexInvalid, or a GGUF file's errors.
std::map<std::string, DType> read_checkpoint_dtypes(const std::string& model_path);

// A GGUF file's block-quantized tensors and their types, by Hugging Face names; empty for
// anything else.
std::map<std::string, const GgmlTypeInfo*> read_checkpoint_blocks(const std::string& model_path);

}  // namespace qmpi
