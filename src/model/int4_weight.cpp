#include "model/int4_weight.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/int4_layout.h"

namespace qmpi {

Int4WeightView Int4Weight::view() const {
  Int4WeightView v;
  v.qweight = qweight.storage.as<const uint32_t>();
  v.scales = scales.storage.as<const uint16_t>();
  v.zeros = zeros.storage.as<const uint8_t>();
  v.group_words = group_words.storage.as<const int32_t>();
  v.x_index = x_index ? x_index.storage.as<const int32_t>() : nullptr;
  v.rows = qweight.rows;
  v.words = qweight.cols;
  v.groups = scales.cols;
  v.in_features = in_features;
  v.layout = layout;
  return v;
}

uint64_t Int4Weight::bytes() const {
  return qweight.storage.bytes() + scales.storage.bytes() + zeros.storage.bytes() +
         group_words.storage.bytes() + x_index.storage.bytes();
}

Int4Host repack_int4(const Int4Unpacked& u) {
  Int4Host h;
  h.rows = u.rows;
  h.groups = u.groups;
  h.in_features = u.inputs;
  // Packed order: inputs by group, input order kept within a group, each group padded to whole
  // words with -1 (an input that multiplies nothing).
  std::vector<int64_t> order(size_t(u.inputs));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return u.group_of[a] < u.group_of[b]; });
  std::vector<int32_t> packed;  // packed position -> input, or -1
  h.group_words.assign(size_t(u.groups + 1), 0);
  size_t next = 0;
  for (int64_t g = 0; g < u.groups; ++g) {
    h.group_words[g] = int32_t(packed.size() / 8);
    while (next < order.size() && u.group_of[order[next]] == g)
      packed.push_back(int32_t(order[next++]));
    while (packed.size() % 8) packed.push_back(-1);
  }
  h.group_words[u.groups] = int32_t(packed.size() / 8);
  h.words = int64_t(packed.size() / 8);
  bool identity = int64_t(packed.size()) == u.inputs;
  for (size_t k = 0; identity && k < packed.size(); ++k) identity = packed[k] == int32_t(k);
  if (!identity) h.x_index = packed;

  h.qweight.assign(size_t(h.rows * h.words), 0u);
  for (int64_t n = 0; n < h.rows; ++n)
    for (int64_t p = 0; p < int64_t(packed.size()); ++p) {
      // Padding positions hold 0; their x is 0, so whatever they dequantize to adds nothing.
      const int64_t k = packed[p];
      const uint32_t q = k >= 0 ? u.q[k * u.rows + n] : 0u;
      h.qweight[n * h.words + p / 8] |= (q & 15u) << (4 * (p % 8));
    }
  h.scales.resize(size_t(h.rows * h.groups));
  h.zeros.resize(size_t(h.rows * h.groups));
  for (int64_t g = 0; g < h.groups; ++g)
    for (int64_t n = 0; n < h.rows; ++n) {
      h.scales[n * h.groups + g] = u.scale[g * u.rows + n];
      h.zeros[n * h.groups + g] = u.zero[g * u.rows + n];
    }
  return h;
}

namespace {

template <class T>
Weight upload(Backend& be, DType dtype, int64_t rows, int64_t cols, const std::vector<T>& v) {
  return be.make_weight(dtype, rows, cols, [&](void* dst) {
    if (!v.empty()) std::memcpy(dst, v.data(), v.size() * sizeof(T));
  });
}

}  // namespace

Int4Weight upload_int4(Backend& be, const Int4Host& h) {
  Int4Weight w;
  w.layout = be.int4_layout();
  w.qweight =
      upload(be, DType::U32, h.rows, h.words, int4_relayout(h.qweight, h.rows, h.words, w.layout));
  w.scales =
      upload(be, DType::F16, h.rows, h.groups, int4_relayout(h.scales, h.rows, h.groups, w.layout));
  w.zeros =
      upload(be, DType::U8, h.rows, h.groups, int4_relayout(h.zeros, h.rows, h.groups, w.layout));
  w.group_words = upload(be, DType::I32, 1, h.groups + 1, h.group_words);
  if (!h.x_index.empty())
    w.x_index = upload(be, DType::I32, 1, int64_t(h.x_index.size()), h.x_index);
  w.in_features = h.in_features;
  return w;
}

}  // namespace qmpi
