#include "model/synthetic_checkpoint.h"

#include <filesystem>
#include <map>

#include "core/errors.h"
#include "io/safetensors_writer.h"
#include "model/config.h"
#include "model/synthetic.h"
#include "model/synthetic_folder.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

uint64_t tensor_bytes(const TensorSpec& t, DType dtype) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : t.shape) n *= uint64_t(d);
  return n;
}

// Contiguous runs of tensors (checkpoint order) with about total/K bytes each and at least one
// tensor per shard: a shard closes once it holds its share of what is left, or when the
// remaining tensors are just enough for one per remaining shard.
std::vector<int> assign_shards(const std::vector<TensorSpec>& specs, DType dtype, int shards) {
  std::vector<int> shard_of(specs.size());
  uint64_t remaining = 0;
  for (const auto& t : specs) remaining += tensor_bytes(t, dtype);
  int shard = 0;
  uint64_t acc = 0;  // bytes in the current shard
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t b = tensor_bytes(specs[i], dtype);
    const int shards_left = shards - shard;
    const size_t tensors_left = specs.size() - i;
    if (shard < shards - 1 && acc > 0) {
      const uint64_t share = (acc + remaining) / uint64_t(shards_left);
      if (tensors_left < size_t(shards_left) || acc + b / 2 > share) {
        ++shard;
        acc = 0;
      }
    }
    shard_of[i] = shard;
    acc += b;
    remaining -= b;
  }
  return shard_of;
}

}  // namespace

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BF16:
      return "bfloat16";
    case DType::F16:
      return "float16";
    case DType::F32:
      return "float32";
    default:
      raise(Err::DTypeUnsupported, "no torch dtype for " + std::string(dtype_name(dtype)));
  }
}

nlohmann::json qwen_generation_config_json(int64_t bos_token_id) {
  return {{"bos_token_id", bos_token_id},
          {"pad_token_id", 151643},
          {"do_sample", true},
          {"eos_token_id", {151645, 151643}},
          {"repetition_penalty", 1.05},
          {"temperature", 0.7},
          {"top_p", 0.8},
          {"top_k", 20}};
}

CheckpointSummary write_synthetic_checkpoint(const std::string& dir, nlohmann::json config_json,
                                             uint64_t seed, DType dtype, int shards) {
  config_json["torch_dtype"] = torch_dtype_name(dtype);
  const ModelConfig cfg = ModelConfig::from_json(config_json, "the config for " + dir);
  const std::vector<TensorSpec> specs = expected_tensors(cfg);
  open_synthetic_folder(dir, shards, specs.size());

  CheckpointSummary summary;
  const std::vector<int> shard_of = assign_shards(specs, dtype, shards);
  std::map<std::string, std::string> weight_map;
  uint64_t data_bytes = 0;
  for (int s = 0; s < shards; ++s) {
    const std::string file = synthetic_shard_name(s, shards);
    SafetensorsWriter writer;
    writer.set_metadata({{"format", "pt"}});
    for (size_t i = 0; i < specs.size(); ++i) {
      if (shard_of[i] != s) continue;
      const TensorSpec& t = specs[i];
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      summary.params += n;
      SyntheticTensor gen(seed, t.name, t.shape);
      writer.add(t.name, dtype, t.shape, [gen, dtype](int64_t first, int64_t count, void* dst) {
        gen.fill(first, count, dtype, dst);
      });
      weight_map[t.name] = file;
    }
    data_bytes += writer.data_bytes();
    summary.file_bytes += writer.write((fs::path(dir) / file).string());
    summary.files.push_back(file);
  }
  close_synthetic_folder(dir, config_json, cfg, shards, data_bytes, weight_map, summary);
  return summary;
}

}  // namespace qmpi
