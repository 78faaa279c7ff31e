#include "model/synthetic_folder.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "io/safetensors_writer.h"
#include "model/config.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) raise(Err::OutputFile, "cannot write " + path.string());
}

}  // namespace

void open_synthetic_folder(const std::string& dir, int shards, size_t tensors) {
  if (shards < 1 || size_t(shards) > tensors)
    raise(Err::Usage, "--shards " + std::to_string(shards) + " must be between 1 and the " +
                          std::to_string(tensors) + " tensors of this model");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) raise(Err::OutputFile, "cannot create folder " + dir + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool shard = name.rfind("model-", 0) == 0 && name.find("-of-") != std::string::npos &&
                       entry.path().extension() == ".safetensors";
    if (shard || name == kSingleSafetensorsName || name == kSafetensorsIndexName)
      fs::remove(entry.path());
  }
}

std::string synthetic_shard_name(int shard, int shards) {
  if (shards == 1) return kSingleSafetensorsName;
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", shard + 1, shards);
  return buf;
}

void close_synthetic_folder(const std::string& dir, const nlohmann::json& config_json,
                            const ModelConfig& cfg, int shards, uint64_t data_bytes,
                            const std::map<std::string, std::string>& weight_map,
                            CheckpointSummary& summary) {
  if (shards > 1) {
    write_safetensors_index(dir, data_bytes, weight_map);
    summary.files.push_back(kSafetensorsIndexName);
  }
  write_json(fs::path(dir) / "config.json", config_json);
  write_json(fs::path(dir) / "generation_config.json",
             qwen_generation_config_json(cfg.bos_token_id < 0 ? 151643 : cfg.bos_token_id));
  summary.files.push_back("config.json");
  summary.files.push_back("generation_config.json");
}

}  // namespace qmpi
