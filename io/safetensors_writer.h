// Writes safetensors files tensor by tensor, so a model larger than memory can be written:
// the header is built from the declared tensors, then each tensor's bytes are produced in
// bounded chunks by its fill callback.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace qmpi {

class SafetensorsWriter {
 public:
  // Produces `count` elements of the tensor, starting at flat (row-major) element `first`,
  // into dst in the tensor's dtype.
  using Fill = std::function<void(int64_t first, int64_t count, void* dst)>;

  void set_metadata(std::map<std::string, std::string> metadata) {
    metadata_ = std::move(metadata);
  }
  void add(std::string name, DType dtype, std::vector<int64_t> shape, Fill fill);
  // Tensor data bytes declared so far (the "total_size" of an index).
  uint64_t data_bytes() const;
  // Writes the file; returns its size in bytes. Throws Error(OutputFile) on I/O failure.
  // Tensors are laid out by descending element size (stable otherwise), and the header is
  // padded with spaces to a multiple of 8, so every tensor is aligned to its element size.
  uint64_t write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    Fill fill;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes <dir>/model.safetensors.index.json: {"metadata": {"total_size": N}, "weight_map": ...}.
void write_safetensors_index(const std::string& dir, uint64_t total_size,
                             const std::map<std::string, std::string>& weight_map);

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";
inline constexpr const char* kSingleSafetensorsName = "model.safetensors";

}  // namespace qmpi
