// One safetensors file, memory-mapped and fully validated on open: header length and JSON,
// dtypes, shapes against byte ranges, and byte ranges tiling the data buffer exactly.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"
#include "io/weight_source.h"

namespace qmpi {

// Readers refuse larger headers (as the reference implementation does) so a damaged length
// cannot make us parse gigabytes of garbage.
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

class SafetensorsFile {
 public:
  // Throws SafetensorsHeader, SafetensorsOffsets or ShardTruncated naming the file (and the
  // tensor when one is at fault); `missing_code` is raised when the file cannot be opened.
  explicit SafetensorsFile(const std::string& path, Err missing_code = Err::InputFile);

  const std::string& path() const { return file_.path(); }
  uint64_t file_size() const { return file_.size(); }
  // Tensors in the order of their bytes in the file.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  // The first byte of the tensor's data (no alignment guaranteed: copy with memcpy).
  const uint8_t* data(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<TensorInfo> tensors_;
  std::vector<uint64_t> offsets_;  // absolute file offset of each tensor in tensors_
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Throws Error(DTypeUnsupported) naming the tensor and file unless it is F32, F16 or BF16:
// other types are read fine but only these can be computed with.
void require_float_weight(const TensorInfo& info);

std::string shape_string(const std::vector<int64_t>& shape);  // "[896, 4864]"

}  // namespace qmpi
