// A Hugging Face model folder: model.safetensors, or model.safetensors.index.json and the
// shards it names. Every shard is mapped and validated on open; reads copy only the slice asked
// for, so a rank touches the pages of its own shard of the weights and nothing else.
#pragma once
#include <atomic>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/safetensors.h"
#include "io/weight_source.h"

namespace qmpi {

class SafetensorsDir : public WeightSource {
 public:
  // Throws ModelDirMissing (no weights in the folder), ShardMissing (a shard named in the index
  // is absent), TensorMissing (the index names a tensor its shard lacks), IndexInvalid, and
  // every SafetensorsFile error.
  explicit SafetensorsDir(const std::string& dir);

  bool has(const std::string& name) const override;
  const TensorInfo& info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  void read(const std::string& name, const Slice& slice, void* dst) override;
  uint64_t bytes_read() const override { return bytes_read_.load(); }

  const std::string& dir() const { return dir_; }
  const std::vector<SafetensorsFile>& shards() const { return shards_; }

 private:
  struct Location {
    size_t shard;
    const TensorInfo* info;
  };
  const Location& locate(const std::string& name) const;

  std::string dir_;
  std::vector<SafetensorsFile> shards_;
  std::unordered_map<std::string, Location> tensors_;
  std::vector<std::string> order_;  // shard order, then file order
  std::atomic<uint64_t> bytes_read_{0};
};

// Copies `slice` of a row-major tensor whose bytes start at src (any alignment) into dst.
// Returns the bytes copied. Shared by every source that holds whole tensors in memory.
uint64_t copy_slice(const uint8_t* src, const TensorInfo& info, const Slice& slice, void* dst);

}  // namespace qmpi
