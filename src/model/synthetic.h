// Deterministic random weights that any rank can generate for its own slice alone.
//
// Element i of tensor `name` is a pure function of (seed, name, i) — a counter-based generator,
// not a stream — so a rank produces exactly the slice it owns without generating the rest, and
// `qmpi make-model` writes the very same values into its checkpoint: a --synthetic-weights run
// equals a run on the make-model checkpoint with the same seed and dtype.
//
// Scales keep the random model numerically tame and its logits well spread (few near-ties in
// the argmax, so greedy continuations do not flip between TP/PP layouts): norms ~1, biases
// small, linear weights preserving the activation scale, embeddings sized so that logits have
// a standard deviation of a few units whatever the hidden size.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/weight_source.h"
#include "model/config.h"

namespace qmpi {

class SyntheticTensor {
 public:
  SyntheticTensor(uint64_t seed, const std::string& name, const std::vector<int64_t>& shape);
  float value(int64_t index) const;
  // Writes elements [first, first + count) in `dtype` (F32, F16 or BF16) to dst.
  void fill(int64_t first, int64_t count, DType dtype, void* dst) const;

 private:
  uint64_t key_;
  float scale_;   // half-width of the uniform distribution
  float offset_;  // its centre (1 for norm weights)
};

class SyntheticWeights : public WeightSource {
 public:
  // dtype must be F32, F16 or BF16 (throws DTypeUnsupported otherwise).
  SyntheticWeights(const ModelConfig& cfg, uint64_t seed, DType dtype);

  bool has(const std::string& name) const override;
  const TensorInfo& info(const std::string& name) const override;
  std::vector<std::string> names() const override;
  void read(const std::string& name, const Slice& slice, void* dst) override;
  uint64_t bytes_read() const override { return bytes_read_; }

 private:
  uint64_t seed_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  uint64_t bytes_read_ = 0;
};

}  // namespace qmpi
