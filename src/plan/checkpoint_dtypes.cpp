#include "plan/checkpoint_dtypes.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "model/gguf_names.h"

namespace qmpi {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The reference reader's limit: a damaged length must not make us read gigabytes.
constexpr uint64_t kMaxHeader = 100'000'000;

void add_header_dtypes(const fs::path& file, std::map<std::string, DType>& out) {
  std::ifstream in(file, std::ios::binary);
  unsigned char len_bytes[8] = {};
  if (!in.read(reinterpret_cast<char*>(len_bytes), 8))
    raise(Err::SafetensorsHeader, file.string() + " is shorter than the 8-byte header length");
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | len_bytes[i];
  if (len > kMaxHeader)
    raise(Err::SafetensorsHeader, file.string() + " declares a " + std::to_string(len) +
                                      "-byte header (the limit is 100000000): not a safetensors "
                                      "file, or a Git LFS pointer");
  std::string text(len, '\0');
  if (!in.read(text.data(), std::streamsize(len)))
    raise(Err::SafetensorsHeader,
          file.string() + " ends inside its " + std::to_string(len) + "-byte JSON header");
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    raise(Err::SafetensorsHeader,
          file.string() + ": the JSON header does not parse (" + e.what() + ")");
  }
  if (!header.is_object())
    raise(Err::SafetensorsHeader, file.string() + ": header is not an object");
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const json dt = entry.is_object() ? entry.value("dtype", json()) : json();
    const auto dtype = dt.is_string() ? parse_dtype(dt.get<std::string>()) : std::nullopt;
    if (!dtype)
      raise(Err::SafetensorsHeader,
            file.string() + ": tensor '" + name + "' has no known dtype (" + entry.dump() + ")");
    out[name] = *dtype;
  }
}

std::vector<fs::path> shards_of_index(const fs::path& index) {
  json j;
  try {
    std::ifstream in(index);
    j = json::parse(in);
  } catch (const json::exception& e) {
    raise(Err::IndexInvalid, index.string() + " is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    raise(Err::IndexInvalid, index.string() + " has no weight_map object");
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      raise(Err::IndexInvalid,
            index.string() + ": weight_map maps '" + name + "' to a non-string " + file.dump());
    const auto& f = file.get_ref<const std::string&>();
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos)
      raise(Err::IndexInvalid, index.string() + ": weight_map maps '" + name + "' to '" + f +
                                   "', which is not a file in the model folder");
    files.insert(f);
  }
  std::vector<fs::path> out;
  for (const auto& f : files) out.push_back(index.parent_path() / f);
  return out;
}

}  // namespace

std::map<std::string, DType> read_checkpoint_dtypes(const std::string& model_path) {
  std::map<std::string, DType> out;
  if (is_gguf_path(model_path)) {
    const GgufNamedWeights model(model_path);
    for (const std::string& name : model.names())
      if (!model.info(name).block_quantized()) out[name] = model.info(name).dtype;
    return out;
  }
  const fs::path dir(model_path);
  if (!fs::is_directory(dir)) return out;
  std::vector<fs::path> shards;
  if (fs::exists(dir / "model.safetensors.index.json"))
    shards = shards_of_index(dir / "model.safetensors.index.json");
  else
    shards.push_back(dir / "model.safetensors");
  for (const auto& shard : shards)
    if (fs::is_regular_file(shard)) add_header_dtypes(shard, out);
  return out;
}

std::map<std::string, const GgmlTypeInfo*> read_checkpoint_blocks(const std::string& model_path) {
  std::map<std::string, const GgmlTypeInfo*> out;
  if (!is_gguf_path(model_path)) return out;
  const GgufNamedWeights model(model_path);
  for (const std::string& name : model.names())
    if (model.info(name).block_quantized()) out[name] = model.info(name).ggml;
  return out;
}

}  // namespace qmpi
