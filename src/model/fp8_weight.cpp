#include "model/fp8_weight.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/errors.h"

namespace qmpi {
namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

void check(WeightSource& src, const std::string& name, DType dtype,
           const std::vector<int64_t>& shape, const std::string& why) {
  const TensorInfo& info = src.info(name);
  if (info.dtype != dtype)
    raise(Err::QuantTensorInvalid, "tensor " + name + " in " + info.file + " has dtype " +
                                       std::string(dtype_name(info.dtype)) + ", but " +
                                       std::string(dtype_name(dtype)) +
                                       " is expected (FP8 checkpoint)");
  if (info.shape != shape)
    raise(Err::QuantTensorInvalid, "tensor " + name + " in " + info.file + " has shape " +
                                       shape_text(info.shape) + " but config.json implies " +
                                       shape_text(shape) + " (" + why + ")");
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

Fp8WeightView Fp8Weight::view() const {
  Fp8WeightView v;
  v.q = q.storage.as<const uint8_t>();
  v.scales = scales.storage.as<const float>();
  v.rows = q.rows;
  v.cols = q.cols;
  v.scale_rows = scales.rows;
  v.scale_cols = scales.cols;
  v.block_n = block_n;
  v.block_k = block_k;
  v.row_offset = row_offset;
  v.col_offset = col_offset;
  return v;
}

std::string fp8_scale_name(const std::string& weight_name) {
  return weight_name + "_scale_inv";
}

Fp8Weight read_fp8_linear(const ModelConfig& cfg, WeightSource& src, Backend& be,
                          const std::string& prefix, int64_t out_features, int64_t in_features,
                          const Slice& slice) {
  const int64_t bn = cfg.quant.block_n, bk = cfg.quant.block_k;
  const std::string wn = prefix + ".weight", sn = fp8_scale_name(wn);
  check(src, wn, DType::F8_E4M3, {out_features, in_features}, "[out_features, in_features]");
  check(src, sn, DType::F32, {ceil_div(out_features, bn), ceil_div(in_features, bk)},
        "one scale per " + std::to_string(bn) + "x" + std::to_string(bk) +
            " block, partial blocks at the edges");

  // This rank's rows [n0, n1) and inputs [k0, k1), and the block rows / columns they touch.
  const bool cols = slice.dim == 0 && slice.length >= 0, rows = slice.dim == 1 && slice.length >= 0;
  const int64_t n0 = cols ? slice.start : 0, n1 = cols ? slice.start + slice.length : out_features;
  const int64_t k0 = rows ? slice.start : 0, k1 = rows ? slice.start + slice.length : in_features;
  Fp8Weight w;
  w.block_n = bn;
  w.block_k = bk;
  w.row_offset = n0 % bn;
  w.col_offset = k0 % bk;
  const int64_t sr0 = n0 / bn, sr1 = ceil_div(n1, bn), sc0 = k0 / bk, sc1 = ceil_div(k1, bk);
  const Slice scale_slice = cols   ? Slice{0, sr0, sr1 - sr0}
                            : rows ? Slice{1, sc0, sc1 - sc0}
                                   : Slice::whole();

  std::vector<float> scales(size_t((sr1 - sr0) * (sc1 - sc0)));
  src.read(sn, scale_slice, scales.data());
  for (size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i]) || scales[i] <= 0.0f)
      raise(Err::QuantTensorInvalid, "tensor " + sn + " in " + src.info(sn).file + " holds scale " +
                                         std::to_string(scales[i]) + " at block " +
                                         std::to_string(i) +
                                         " of this rank's slice; FP8 block scales are positive "
                                         "finite numbers");
  w.scales = be.make_weight(DType::F32, sr1 - sr0, sc1 - sc0, [&](void* dst) {
    std::memcpy(dst, scales.data(), scales.size() * sizeof(float));
  });
  w.q = be.make_weight(DType::U8, n1 - n0, k1 - k0, [&](void* dst) {
    src.read(wn, slice, dst);
    // e4m3 has no infinities; its NaN codes (S.1111.111) mean a damaged file.
    const auto* b = static_cast<const uint8_t*>(dst);
    for (int64_t i = 0; i < (n1 - n0) * (k1 - k0); ++i)
      if ((b[i] & 0x7f) == 0x7f)
        raise(Err::QuantTensorInvalid,
              "tensor " + wn + " in " + src.info(wn).file + " holds the e4m3 NaN code 0x" +
                  (b[i] == 0xff ? std::string("ff") : "7f") + " at element " + std::to_string(i) +
                  " of this rank's slice");
  });
  return w;
}

}  // namespace qmpi
