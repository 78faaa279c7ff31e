#include "io/h5_layout.h"

#include <numeric>
#include <string_view>

namespace qmpi {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

int64_t smallest_prime_factor(int64_t n) {
  for (int64_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return p;
  return n;
}

}  // namespace

TpSplit tp_split(const std::string& name, int64_t head_dim) {
  for (const char* p : {"self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj."})
    if (name.find(p) != std::string::npos) return {0, head_dim};
  if (ends_with(name, "self_attn.o_proj.weight")) return {1, head_dim};
  if (ends_with(name, "mlp.gate_proj.weight") || ends_with(name, "mlp.up_proj.weight"))
    return {0, 1};
  if (ends_with(name, "mlp.down_proj.weight")) return {1, 1};
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight") return {0, 1};
  return {};
}

std::vector<int64_t> chunk_shape(const std::vector<int64_t>& shape, TpSplit split,
                                 size_t elem_size) {
  if (shape.empty()) return {};
  int64_t numel = 1;
  for (int64_t e : shape) numel *= e;
  if (numel == 0) return {};
  const bool split_here = split.dim >= 0 && size_t(split.dim) < shape.size();
  const size_t d = split_here ? size_t(split.dim) : 0;
  const int64_t extent = shape[d];
  const int64_t unit = split_here && split.unit > 0 && extent % split.unit == 0 ? split.unit : 1;
  const int64_t units = extent / unit;
  const uint64_t unit_bytes = uint64_t(numel / extent * unit) * elem_size;
  int64_t chunks = split_here ? std::gcd(units, kChunkTpSizes) : 1;
  while (units / chunks > 1 && uint64_t(units / chunks) * unit_bytes > kMaxChunkBytes)
    chunks *= smallest_prime_factor(units / chunks);
  std::vector<int64_t> chunk = shape;
  chunk[d] = units / chunks * unit;
  return chunk;
}

}  // namespace qmpi
