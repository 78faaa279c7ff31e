#include "model/weight_loader.h"

#include "core/dtype.h"
#include "core/errors.h"
#include "model/ggml_weight.h"
#include "model/int4_loader.h"

namespace qmpi {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

const TensorInfo& WeightLoader::checked(const std::string& name,
                                        const std::vector<int64_t>& shape) const {
  const TensorInfo& info = src_.info(name);
  if (!is_float_weight(info.dtype) && !info.block_quantized())
    raise(Err::DTypeUnsupported, "tensor " + name + " in " + info.file + " has dtype " +
                                     std::string(dtype_name(info.dtype)) +
                                     "; qmpi computes from F32, F16 or BF16 weights");
  if (info.shape != shape)
    raise(Err::TensorShapeMismatch, "tensor " + name + " in " + info.file + " has shape " +
                                        shape_str(info.shape) + " but config.json implies " +
                                        shape_str(shape));
  return info;
}

Slice WeightLoader::slice_of(const std::string& name) const {
  auto slice = plan_.slice_for(cfg_, name);
  if (!slice) raise(Err::Internal, "shard plan does not assign " + name + " to this rank");
  return *slice;
}

Weight WeightLoader::load(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorInfo& info = checked(name, shape);
  const Slice slice = slice_of(name);
  int64_t rows = shape.size() == 2 ? shape[0] : 1;
  int64_t cols = shape.size() == 2 ? shape[1] : shape[0];
  if (slice.length >= 0) {
    if (shape.size() == 1 || slice.dim == 1)
      cols = slice.length;
    else
      rows = slice.length;
  }
  // GGUF blocks asked for as a dense weight (a slice that would cut a block): decoded to
  // float32 once, here.
  if (info.block_quantized()) {
    Weight w = read_ggml_dequantized(src_, be_, name, slice);
    bytes_ += w.storage.bytes();
    return w;
  }
  const DType dtype = shape.size() == 2 ? be_.matrix_dtype(info.dtype) : info.dtype;
  if (dtype != info.dtype && !(info.dtype == DType::F16 && dtype == DType::BF16))
    raise(Err::Internal, "the backend asks for " + name + " as " + std::string(dtype_name(dtype)) +
                             "; the loader converts only F16 to BF16");
  Weight w = be_.make_weight(dtype, rows, cols, [&](void* dst) {
    src_.read(name, slice, dst);
    if (dtype == info.dtype) return;
    auto* h = static_cast<uint16_t*>(dst);  // the same width: rounded in place
    for (int64_t i = 0; i < rows * cols; ++i) h[i] = f32_to_bf16(f16_to_f32(h[i]));
  });
  bytes_ += uint64_t(rows * cols) * dtype_size(dtype);
  return w;
}

GgmlWeight WeightLoader::load_blocks(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorInfo& info = checked(name, shape);
  if (!info.block_quantized()) return {};
  const Slice slice = slice_of(name);
  if (!slice_keeps_blocks(info, slice)) return {};
  GgmlWeight w = read_ggml_weight(src_, be_, name, slice);
  bytes_ += w.bytes();
  return w;
}

Linear WeightLoader::load_linear(const std::string& prefix, int64_t out_features,
                                 int64_t in_features, bool bias) {
  Linear lin;
  // Quantized checkpoints keep MoE routers (mlp.gate, shared_expert_gate) in float: only the
  // *_proj projections (attention, MLP, experts, shared expert) are e4m3 or int4.
  if (cfg_.quant.fp8() && prefix.ends_with("_proj")) {
    auto slice = plan_.slice_for(cfg_, prefix + ".weight");
    if (!slice) raise(Err::Internal, "shard plan does not assign " + prefix + " to this rank");
    lin.fp8 = read_fp8_linear(cfg_, src_, be_, prefix, out_features, in_features, *slice);
    bytes_ += lin.fp8.bytes();
  } else if (cfg_.quant.int4() && prefix.ends_with("_proj")) {
    auto slice = plan_.slice_for(cfg_, prefix + ".weight");
    if (!slice) raise(Err::Internal, "shard plan does not assign " + prefix + " to this rank");
    lin.int4 = upload_int4(
        be_, repack_int4(read_int4_linear(cfg_, src_, prefix, out_features, in_features, *slice)));
    bytes_ += lin.int4.bytes();
  } else {
    // GGUF blocks when the slice keeps them whole; else (a column slice that would cut a block,
    // say a head split inside a k-quant super-block, or a float tensor) a dense weight.
    const std::string name = prefix + ".weight";
    lin.ggml = load_blocks(name, {out_features, in_features});
    if (!lin.ggml) lin.weight = load(name, {out_features, in_features});
  }
  if (bias) lin.bias = load(prefix + ".bias", {out_features});
  return lin;
}

}  // namespace qmpi
