// A GGUF model, one file or split into NAME-00001-of-0000N.gguf parts (llama.cpp's gguf-split:
// split.no, split.count, split.tensors.count), served as one set of named tensors. Names are the
// file's (llama.cpp's: "blk.0.attn_q.weight"); shapes are listed outermost first like every
// other source ([rows, cols] for a matrix), the reverse of the file's innermost-first order.
#pragma once
#include <atomic>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/gguf_file.h"
#include "io/weight_source.h"

namespace qmpi {

class GgufWeights : public WeightSource {
 public:
  // Opens `path` and, when it is the first part of a split model, every other part beside it.
  // Throws every GgufFile error, and GgufSplit when a part is missing, numbered wrongly or
  // repeats a tensor, or when `path` is not the first part.
  explicit GgufWeights(const std::string& path);

  bool has(const std::string& name) const override;
  const TensorInfo& info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  // F32/F16/BF16: any slice. Block-quantized: rows freely, columns (the last dimension) only
  // on block edges (Internal error otherwise: the shard plan cuts there).
  void read(const std::string& name, const Slice& slice, void* dst) override;
  uint64_t bytes_read() const override { return bytes_read_.load(); }

  // The first part: the model's metadata (architecture, hyper-parameters, tokenizer).
  const GgufFile& meta() const { return parts_.front(); }
  const std::vector<GgufFile>& parts() const { return parts_; }

 private:
  struct Entry {
    TensorInfo info;
    const uint8_t* data;
  };
  std::vector<GgufFile> parts_;
  std::unordered_map<std::string, Entry> tensors_;
  std::vector<std::string> order_;
  std::atomic<uint64_t> bytes_read_{0};
};

// The part paths of the split model whose first part is `path` ("m-00001-of-00003.gguf" ->
// the three names); just `path` for a file that is not named like a split part. Throws GgufSplit
// when `path` names a later part.
std::vector<std::string> gguf_part_paths(const std::string& path);

}  // namespace qmpi
