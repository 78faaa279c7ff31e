#include "model/int4_loader.h"

#include <algorithm>

#include "core/errors.h"

namespace qmpi {
namespace {

// AWQ packs output column 8c + kAwqOrder[i] into nibble i of word c (facts sheet §6).
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Checks `name`'s dtype and full shape against what the config implies.
const TensorInfo& check(WeightSource& src, const std::string& name, DType dtype,
                        const std::vector<int64_t>& shape, const std::string& why) {
  const TensorInfo& info = src.info(name);
  if (info.dtype != dtype)
    raise(Err::QuantTensorInvalid, "tensor " + name + " in " + info.file + " has dtype " +
                                       std::string(dtype_name(info.dtype)) + ", but " +
                                       std::string(dtype_name(dtype)) + " is expected");
  if (info.shape != shape)
    raise(Err::QuantTensorInvalid, "tensor " + name + " in " + info.file + " has shape " +
                                       shape_text(info.shape) + " but config.json implies " +
                                       shape_text(shape) + " (" + why + ")");
  return info;
}

template <class T>
std::vector<T> read(WeightSource& src, const std::string& name, const Slice& s) {
  std::vector<T> v(size_t(slice_numel(src.info(name).shape, s)));
  src.read(name, s, v.data());
  return v;
}

// A NaN or infinite fp16 scale (exponent bits all ones) poisons every weight of its group and,
// through them, every logit: found here, at load, in the slice this rank holds.
void check_finite_scales(const WeightSource& src, const std::string& name,
                         const std::vector<uint16_t>& scale, int64_t rows, int64_t g0, int64_t n0) {
  for (size_t i = 0; i < scale.size(); ++i) {
    if ((scale[i] & 0x7C00u) != 0x7C00u) continue;
    const int64_t g = g0 + int64_t(i) / rows, n = n0 + int64_t(i) % rows;
    raise(Err::QuantTensorInvalid,
          "tensor " + name + " in " + src.info(name).file + " holds " +
              ((scale[i] & 0x03FFu) ? "NaN" : "an infinity") + " at [" + std::to_string(g) + ", " +
              std::to_string(n) + "]",
          "Download the named shard again, or quantize the model again.");
  }
}

// The packed zero points [groups, rows / 8] as true zeros [groups, rows].
std::vector<uint8_t> unpack_zeros(const std::vector<int32_t>& qz, int64_t groups, int64_t rows,
                                  bool awq) {
  std::vector<uint8_t> z(size_t(groups * rows));
  const int64_t wpr = rows / 8;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < wpr; ++c) {
      const uint32_t word = uint32_t(qz[g * wpr + c]);
      for (int i = 0; i < 8; ++i) {
        const uint32_t nib = (word >> (4 * i)) & 15u;
        // GPTQ stores zero - 1 ("gptq" checkpoint format); AWQ the zero itself.
        z[g * rows + 8 * c + (awq ? kAwqOrder[i] : i)] = uint8_t(awq ? nib : nib + 1);
      }
    }
  return z;
}

}  // namespace

Int4Unpacked read_int4_linear(const ModelConfig& cfg, WeightSource& src, const std::string& prefix,
                              int64_t out_features, int64_t in_features, const Slice& slice) {
  const QuantConfig& qc = cfg.quant;
  const bool awq = qc.method == QuantMethod::Awq;
  const int64_t N = out_features, K = in_features, G = qc.groups(K), gs = qc.group_rows(K);
  const std::string qw = prefix + ".qweight", qz = prefix + ".qzeros", sc = prefix + ".scales",
                    gi = prefix + ".g_idx";
  const std::string fmt = awq ? "AWQ" : "GPTQ";
  check(src, qw, DType::I32, awq ? std::vector<int64_t>{K, N / 8} : std::vector<int64_t>{K / 8, N},
        fmt + " packs 8 " + (awq ? "output columns" : "input rows") + " per int32");
  check(src, qz, DType::I32, {G, N / 8},
        std::to_string(G) + " groups of " + std::to_string(gs) + " inputs, 8 zeros per int32");
  check(src, sc, DType::F16, {G, N},
        std::to_string(G) + " groups of " + std::to_string(gs) + " inputs");
  if (!awq) check(src, gi, DType::I32, {K}, "one group index per input row");

  // This rank's outputs [n0, n1) and inputs [k0, k1).
  const bool cols = slice.dim == 0 && slice.length >= 0, rows = slice.dim == 1 && slice.length >= 0;
  const int64_t n0 = cols ? slice.start : 0, n1 = cols ? slice.start + slice.length : N;
  const int64_t k0 = rows ? slice.start : 0, k1 = rows ? slice.start + slice.length : K;
  if (n0 % 8 || n1 % 8 || k0 % 8 || k1 % 8)
    raise(Err::Internal, "shard plan cuts " + prefix + " at outputs [" + std::to_string(n0) + ", " +
                             std::to_string(n1) + ") inputs [" + std::to_string(k0) + ", " +
                             std::to_string(k1) + "), not on whole int32 words");
  Int4Unpacked u;
  u.rows = n1 - n0;
  u.inputs = k1 - k0;

  // The group of every held input, as the checkpoint says: k / group for AWQ, g_idx for GPTQ
  // (never assumed to be k / group: act-order permutes it).
  std::vector<int32_t> group(size_t(u.inputs));
  if (awq) {
    for (int64_t k = 0; k < u.inputs; ++k) group[k] = int32_t((k0 + k) / gs);
  } else {
    group = read<int32_t>(src, gi, rows ? Slice{0, k0, u.inputs} : Slice::whole());
    for (int64_t k = 0; k < u.inputs; ++k)
      if (group[k] < 0 || group[k] >= G)
        raise(Err::QuantTensorInvalid, "tensor " + gi + " in " + src.info(gi).file +
                                           " gives input row " + std::to_string(k0 + k) +
                                           " group " + std::to_string(group[k]) + ", outside [0, " +
                                           std::to_string(G) + ")");
  }
  // Each rank reads the scale/zero rows of the groups its inputs reference, [g0, g1): with
  // act-order a rank's rows reach most groups, so that is usually all of them (they are small:
  // 1/64 of the packed weight at group 128).
  const int32_t g0 = u.inputs ? *std::min_element(group.begin(), group.end()) : 0;
  const int32_t g1 = u.inputs ? *std::max_element(group.begin(), group.end()) + 1 : 0;
  u.groups = g1 - g0;
  u.group_of.resize(group.size());
  for (size_t k = 0; k < group.size(); ++k) u.group_of[k] = group[k] - g0;

  const Slice group_rows{0, g0, u.groups};
  const Slice zero_cols{1, n0 / 8, u.rows / 8};
  const Slice scale_cols{1, n0, u.rows};
  std::vector<int32_t> zeros_packed, words;
  if (cols) {  // every group, this rank's columns
    zeros_packed = read<int32_t>(src, qz, zero_cols);
    u.scale = read<uint16_t>(src, sc, scale_cols);
    words = read<int32_t>(src, qw, awq ? zero_cols : scale_cols);
  } else {  // this rank's groups and input rows, every column
    zeros_packed = read<int32_t>(src, qz, group_rows);
    u.scale = read<uint16_t>(src, sc, group_rows);
    words = read<int32_t>(src, qw, awq ? Slice{0, k0, u.inputs} : Slice{0, k0 / 8, u.inputs / 8});
  }
  if (cols && u.groups != G) {  // the reads above took all groups; keep those referenced
    zeros_packed.erase(zeros_packed.begin(), zeros_packed.begin() + g0 * (u.rows / 8));
    zeros_packed.resize(size_t(u.groups * (u.rows / 8)));
    u.scale.erase(u.scale.begin(), u.scale.begin() + g0 * u.rows);
    u.scale.resize(size_t(u.groups * u.rows));
  }
  check_finite_scales(src, sc, u.scale, u.rows, g0, n0);
  u.zero = unpack_zeros(zeros_packed, u.groups, u.rows, awq);

  u.q.resize(size_t(u.inputs * u.rows));
  if (awq) {  // words [inputs, rows / 8], 8 interleaved columns each
    const int64_t wpr = u.rows / 8;
    for (int64_t k = 0; k < u.inputs; ++k)
      for (int64_t c = 0; c < wpr; ++c) {
        const uint32_t word = uint32_t(words[k * wpr + c]);
        for (int i = 0; i < 8; ++i)
          u.q[k * u.rows + 8 * c + kAwqOrder[i]] = uint8_t((word >> (4 * i)) & 15u);
      }
  } else {  // words [inputs / 8, rows], 8 consecutive input rows each
    for (int64_t r = 0; r < u.inputs / 8; ++r)
      for (int64_t n = 0; n < u.rows; ++n) {
        const uint32_t word = uint32_t(words[r * u.rows + n]);
        for (int j = 0; j < 8; ++j)
          u.q[(8 * r + j) * u.rows + n] = uint8_t((word >> (4 * j)) & 15u);
      }
  }
  return u;
}

}  // namespace qmpi
