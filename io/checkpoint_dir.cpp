#include "io/checkpoint_dir.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "io/safetensors_writer.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

// shard file name -> tensors the index assigns to it, shards sorted by name (model-00001-...
// first).
std::vector<std::pair<std::string, std::vector<std::string>>> read_index(const std::string& path) {
  std::ifstream in(path);
  if (!in) raise(Err::IndexInvalid, "cannot read " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    raise(Err::IndexInvalid, path + " is not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    raise(Err::IndexInvalid, path + " has no \"weight_map\" object");
  std::map<std::string, std::vector<std::string>> by_file;
  for (auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string())
      raise(Err::IndexInvalid, path + ": weight_map entry '" + tensor + "' is not a file name");
    const auto& name = file.get_ref<const std::string&>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      raise(Err::IndexInvalid, path + ": weight_map entry '" + tensor + "' names '" + name +
                                   "', which is not a file in the model folder");
    by_file[name].push_back(tensor);
  }
  if (by_file.empty()) raise(Err::IndexInvalid, path + " has an empty weight_map");
  return {by_file.begin(), by_file.end()};
}

}  // namespace

SafetensorsDir::SafetensorsDir(const std::string& dir) : dir_(dir) {
  const fs::path root(dir);
  const fs::path index = root / kSafetensorsIndexName;
  const fs::path single = root / kSingleSafetensorsName;
  if (fs::exists(index)) {
    for (auto& [file, names] : read_index(index.string())) {
      const fs::path shard = root / file;
      if (!fs::exists(shard))
        raise(Err::ShardMissing,
              "shard " + file + " (named in " + index.string() + " for " +
                  std::to_string(names.size()) + " tensors, e.g. '" + names.front() +
                  "') is not in " + dir,
              "Download " + file + " into " + dir + ".");
      shards_.emplace_back(shard.string(), Err::ShardMissing);
      const SafetensorsFile& sf = shards_.back();
      for (const auto& name : names) {
        const TensorInfo* info = sf.find(name);
        if (!info)
          raise(Err::TensorMissing, "tensor '" + name + "' is mapped to " + file + " by " +
                                        index.string() + " but that shard does not hold it");
        tensors_.emplace(name, Location{shards_.size() - 1, info});
      }
    }
  } else if (fs::exists(single)) {
    shards_.emplace_back(single.string(), Err::ShardMissing);
    for (const auto& t : shards_.back().tensors()) tensors_.emplace(t.name, Location{0, &t});
  } else {
    raise(Err::ModelDirMissing,
          dir + " has neither " + kSingleSafetensorsName + " nor " + kSafetensorsIndexName,
          "Point --model at a Hugging Face model folder, or create one with `qmpi make-model "
          "--out DIR`.");
  }
  for (size_t s = 0; s < shards_.size(); ++s)
    for (const auto& t : shards_[s].tensors()) {
      auto it = tensors_.find(t.name);
      if (it != tensors_.end() && it->second.shard == s) order_.push_back(t.name);
    }
}

const SafetensorsDir::Location& SafetensorsDir::locate(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    raise(Err::TensorMissing, "tensor '" + name + "' is not in the checkpoint " + dir_);
  return it->second;
}

bool SafetensorsDir::has(const std::string& name) const {
  return tensors_.count(name) != 0;
}

const TensorInfo& SafetensorsDir::info(const std::string& name) const {
  return *locate(name).info;
}

std::vector<std::string> SafetensorsDir::names() const {
  return order_;
}

void SafetensorsDir::read(const std::string& name, const Slice& slice, void* dst) {
  const Location& loc = locate(name);
  bytes_read_ += copy_slice(shards_[loc.shard].data(name), *loc.info, slice, dst);
}

uint64_t copy_slice(const uint8_t* src, const TensorInfo& info, const Slice& slice, void* dst) {
  const int64_t n = slice_numel(info.shape, slice);
  const size_t esize = dtype_size(info.dtype);
  auto* out = static_cast<uint8_t*>(dst);
  if (info.shape.empty()) {  // a scalar
    std::memcpy(out, src, esize);
    return esize;
  }
  // outer x [dim] x inner: each of the `outer` blocks contributes one contiguous run.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < slice.dim; ++d) outer *= info.shape[size_t(d)];
  for (size_t d = size_t(slice.dim) + 1; d < info.shape.size(); ++d) inner *= info.shape[d];
  const int64_t extent = info.shape[size_t(slice.dim)];
  const int64_t length = slice.length < 0 ? extent : slice.length;
  const uint64_t run = uint64_t(length * inner) * esize;
  const uint64_t stride = uint64_t(extent * inner) * esize;
  const uint8_t* from = src + uint64_t(slice.start * inner) * esize;
  for (int64_t o = 0; o < outer; ++o) std::memcpy(out + o * run, from + o * stride, run);
  return uint64_t(n) * esize;
}

}  // namespace qmpi
