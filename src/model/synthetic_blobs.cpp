#include "model/synthetic_blobs.h"

#include <filesystem>
#include <map>
#include <memory>

#include "io/safetensors_writer.h"
#include "model/int4_tensors.h"
#include "model/synthetic.h"
#include "model/synthetic_folder.h"

namespace qmpi {
namespace fs = std::filesystem;
using nlohmann::json;

CheckpointSummary write_blob_model(const std::string& dir, const json& config,
                                   const std::vector<TensorSpec>& specs, int shards,
                                   const std::function<std::vector<Blob>(const TensorSpec&)>& make,
                                   const ModelConfig& cfg) {
  open_synthetic_folder(dir, shards, specs.size());
  CheckpointSummary summary;
  std::map<std::string, std::string> weight_map;
  uint64_t data_bytes = 0;
  const size_t per = (specs.size() + size_t(shards) - 1) / size_t(shards);
  for (int s = 0; s < shards; ++s) {
    const std::string file = synthetic_shard_name(s, shards);
    SafetensorsWriter writer;
    writer.set_metadata({{"format", "pt"}});
    std::vector<std::shared_ptr<Blob>> held;
    for (size_t i = size_t(s) * per; i < std::min(specs.size(), size_t(s + 1) * per); ++i) {
      int64_t n = 1;
      for (int64_t d : specs[i].shape) n *= d;
      summary.params += n;
      for (Blob& b : make(specs[i])) {
        auto p = std::make_shared<Blob>(std::move(b));
        const size_t es = dtype_size(p->dtype);
        writer.add(p->name, p->dtype, p->shape, [p, es](int64_t first, int64_t count, void* dst) {
          std::memcpy(dst, p->bytes.data() + size_t(first) * es, size_t(count) * es);
        });
        weight_map[p->name] = file;
        held.push_back(p);
      }
    }
    data_bytes += writer.data_bytes();
    summary.file_bytes += writer.write((fs::path(dir) / file).string());
    summary.files.push_back(file);
  }
  close_synthetic_folder(dir, config, cfg, shards, data_bytes, weight_map, summary);
  return summary;
}

Blob dense_blob(uint64_t seed, const TensorSpec& t, DType dtype) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  Blob b{t.name, dtype, t.shape, std::vector<uint8_t>(size_t(n) * dtype_size(dtype))};
  SyntheticTensor(seed, t.name, t.shape).fill(0, n, dtype, b.bytes.data());
  return b;
}

CheckpointSummary write_quantized_model(const std::string& dir, const json& config,
                                        const std::vector<TensorSpec>& specs, int shards,
                                        const ModelConfig& cfg, uint64_t seed, DType dense_dtype,
                                        const QuantizedBlobs& q, const std::string& float_dir) {
  const CheckpointSummary summary = write_blob_model(
      dir, config, specs, shards,
      [&](const TensorSpec& t) -> std::vector<Blob> {
        if (!is_quantized_projection(t.name)) return {dense_blob(seed, t, dense_dtype)};
        return q.stored(t);
      },
      cfg);
  if (!float_dir.empty()) {
    json float_config = config;
    float_config.erase("quantization_config");
    write_blob_model(
        float_dir, float_config, specs, shards,
        [&](const TensorSpec& t) -> std::vector<Blob> {
          if (!is_quantized_projection(t.name)) return {dense_blob(seed, t, dense_dtype)};
          return {q.dequantized(t)};
        },
        cfg);
  }
  return summary;
}

}  // namespace qmpi
