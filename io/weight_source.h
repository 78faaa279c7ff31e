// The seam between the model and its files: safetensors folders and qmpi .h5 files both serve
// named tensors, and each rank reads only the slices it owns.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/ggml_types.h"

namespace qmpi {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  std::string file;  // the shard (or .h5) that holds it, for error messages
  // GGUF tensors: their ggml type. A block-quantized one has dtype U8, nbytes its real bytes,
  // and is read in whole blocks (a dim-1 slice starts and ends on block edges).
  const GgmlTypeInfo* ggml = nullptr;

  bool block_quantized() const { return ggml && ggml->block_elems > 1; }
};

// A contiguous range along one dimension. For an nn.Linear weight [out, in], dim 0 selects
// output rows (column-parallel layers), dim 1 input columns (row-parallel layers).
struct Slice {
  int dim = 0;
  int64_t start = 0;
  int64_t length = -1;  // -1: the whole dimension (then `start` must be 0)

  static Slice whole() { return {}; }
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // Throws Error(TensorMissing) naming the tensor when absent.
  virtual const TensorInfo& info(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
  // Copies the slice of `name` into dst, row-major, in the tensor's file dtype, reading only the
  // bytes of the slice (strided for dim 1). dst must hold slice_numel * dtype_size bytes.
  virtual void read(const std::string& name, const Slice& slice, void* dst) = 0;
  // Bytes of tensor data copied out so far (for the per-rank loading log and tests).
  virtual uint64_t bytes_read() const = 0;
};

// Element count of `slice` of a tensor with `shape` (validates the range; throws Usage-free
// Internal errors on a bad slice, since slices come from the shard plan, not from users).
int64_t slice_numel(const std::vector<int64_t>& shape, const Slice& slice);

// Opens a model: a folder with model.safetensors or model.safetensors.index.json, or a .h5 file.
// verify_checksums: check the CRC-32s of every chunk read (.h5 files; safetensors have none).
std::unique_ptr<WeightSource> open_weight_source(const std::string& model_path,
                                                 bool verify_checksums = false);

}  // namespace qmpi
