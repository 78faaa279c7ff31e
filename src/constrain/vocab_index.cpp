#include "constrain/vocab_index.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "text/tokenizer.h"

namespace qmpi {

VocabIndex::VocabIndex(const std::vector<std::string>& bytes, int64_t rows)
    : rows_(std::max<int64_t>(rows, int64_t(bytes.size()))), bytes_(bytes) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty()) order.push_back(int32_t(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] ||
           (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });
  nodes_.emplace_back();
  build(0, order, 0, order.size(), 0);
}

// `order[lo, hi)` share their first `depth` bytes, the prefix node `at` stands for. Children are
// laid out together before any grandchild, so a node's children are one contiguous run.
void VocabIndex::build(uint32_t at, const std::vector<int32_t>& order, size_t lo, size_t hi,
                       size_t depth) {
  nodes_[at].tokens_begin = uint32_t(tokens_.size());
  while (lo < hi && bytes_[size_t(order[lo])].size() == depth) tokens_.push_back(order[lo++]);
  nodes_[at].tokens_end = uint32_t(tokens_.size());
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = lo; i < hi;) {
    const char b = bytes_[size_t(order[i])][depth];
    size_t j = i;
    while (j < hi && bytes_[size_t(order[j])][depth] == b) ++j;
    groups.push_back({i, j});
    i = j;
  }
  const auto first = uint32_t(nodes_.size());
  nodes_[at].first_child = first;
  nodes_[at].num_children = uint32_t(groups.size());
  nodes_.resize(nodes_.size() + groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    nodes_[first + k].byte = uint8_t(bytes_[size_t(order[groups[k].first])][depth]);
    build(first + uint32_t(k), order, groups[k].first, groups[k].second, depth + 1);
  }
}

std::string_view VocabIndex::bytes(int32_t id) const {
  return id >= 0 && size_t(id) < bytes_.size() ? std::string_view(bytes_[size_t(id)])
                                               : std::string_view();
}

std::shared_ptr<const VocabIndex> VocabIndex::from_tokenizer(const Tokenizer& tok, int64_t rows) {
  // Ids past the model's rows cannot be sampled: left out.
  std::vector<std::string> bytes(size_t(std::min<int64_t>(tok.vocab_size(), rows)));
  for (int32_t id = 0; id < int32_t(bytes.size()); ++id)
    if (tok.has_token(id) && !tok.is_special(id))
      bytes[size_t(id)] = std::string(tok.token_bytes(id));
  return std::make_shared<const VocabIndex>(bytes, rows);
}

std::shared_ptr<const VocabIndex> VocabIndex::shared(const Tokenizer& tok, int64_t rows) {
  static std::mutex mu;
  static std::map<std::pair<const Tokenizer*, int64_t>, std::shared_ptr<const VocabIndex>> built;
  std::lock_guard lock(mu);
  auto& v = built[{&tok, rows}];
  if (!v) v = from_tokenizer(tok, rows);
  return v;
}

}  // namespace qmpi
