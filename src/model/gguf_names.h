// A GGUF model under the Hugging Face tensor names the loader, the shard plan and the planner
// use: llama.cpp's converter renames every tensor ("model.layers.3.self_attn.q_proj.weight" is
// "blk.3.attn_q.weight") and keeps the values as they are (for Qwen it does not permute q/k
// rows, unlike LLaMA's: conversion/qwen.py leaves TextModel's tensors unchanged), so a rename is
// all that stands between a GGUF file and the safetensors path.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/gguf_weights.h"

namespace qmpi {

// llama.cpp's name for the Hugging Face tensor `hf`, nullopt for a name it has none for.
// MoE experts are stacked in GGUF (blk.N.ffn_gate_exps.weight [experts, rows, cols]); each
// expert's slab is served as model.layers.N.mlp.experts.E.gate_proj.weight.
std::optional<std::string> gguf_tensor_name(const std::string& hf);

class GgufNamedWeights : public WeightSource {
 public:
  explicit GgufNamedWeights(const std::string& path);

  bool has(const std::string& name) const override;
  const TensorInfo& info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  void read(const std::string& name, const Slice& slice, void* dst) override;
  uint64_t bytes_read() const override { return file_.bytes_read(); }

  const GgufWeights& file() const { return file_; }

 private:
  const std::string& gguf_name(const std::string& hf) const;

  GgufWeights file_;
  std::unordered_map<std::string, std::string> to_gguf_;  // HF name -> GGUF name
  std::unordered_map<std::string, TensorInfo> infos_;     // by HF name
  std::vector<std::string> order_;                        // HF names in file order
};

// Opens a model's weights by Hugging Face names: a .gguf file (or the first of its parts), a
// folder or a .h5 file (io/weight_source.h).
std::unique_ptr<WeightSource> open_model_weights(const std::string& model_path,
                                                 bool verify_checksums = false);

}  // namespace qmpi
