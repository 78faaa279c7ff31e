#include "text/bpe.h"

#include <queue>

namespace qmpi {

Bpe::Bpe(std::array<int32_t, 256> byte_ids, std::unordered_map<uint64_t, Merge> merges,
         bool ignore_merges, StringMap<int32_t> whole_pieces)
    : byte_ids_(byte_ids),
      merges_(std::move(merges)),
      ignore_merges_(ignore_merges),
      whole_pieces_(std::move(whole_pieces)) {}

void Bpe::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = whole_pieces_.find(piece);
    if (it != whole_pieces_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() > kCacheMaxBytes) {
    merge(piece, out);
    return;
  }
  {
    std::lock_guard lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge(piece, out);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::lock_guard lock(cache_mu_);
  if (cache_.size() >= kCacheMaxEntries) cache_.clear();
  cache_.emplace(std::string(piece), std::move(ids));
}

void Bpe::merge(std::string_view piece, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;  // -1 once merged into its left neighbour
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;  // the left symbol of the pair
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> sym(piece.size());
  for (int32_t i = 0; i < n; ++i)
    sym[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(pair_key(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (left.id < 0 || left.next < 0) continue;
    // An entry is stale when either symbol changed since it was pushed; a rank names one pair,
    // so an unchanged rank means an unchanged pair.
    auto it = merges_.find(pair_key(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.rank != c.rank) continue;
    Symbol& right = sym[left.next];
    left.id = it->second.result;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    right.id = -1;
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace qmpi
