#include "engine/draft_kv_book.h"

#include <algorithm>

namespace qmpi {

DraftKvBook::DraftKvBook(int64_t num_blocks, int block_size) : blocks_(num_blocks, block_size) {}

void DraftKvBook::shrink(Entry& e, int64_t tokens) {
  e.tokens.resize(size_t(tokens));
  const auto keep = size_t(blocks_.blocks_for(tokens));
  if (e.blocks.size() <= keep) return;
  std::vector<int32_t> tail(e.blocks.begin() + long(keep), e.blocks.end());
  e.blocks.resize(keep);
  blocks_.release(tail);
}

int64_t DraftKvBook::keep_prefix(int64_t id, std::span<const int32_t> context) {
  Entry& e = seqs_[id];
  e.used = ++clock_;
  const size_t limit = std::min(e.tokens.size(), context.empty() ? 0 : context.size() - 1);
  const auto end = std::mismatch(e.tokens.begin(), e.tokens.begin() + long(limit), context.begin());
  const auto kept = int64_t(end.first - e.tokens.begin());
  shrink(e, kept);
  return kept;
}

bool DraftKvBook::reserve(int64_t id, int64_t tokens) {
  Entry& e = seqs_[id];
  e.used = ++clock_;
  const int64_t need = blocks_.blocks_for(tokens) - int64_t(e.blocks.size());
  if (need > blocks_.num_blocks() - int64_t(e.blocks.size())) {
    forget(id);
    return false;
  }
  while (need > blocks_.free_blocks()) {
    auto lru = seqs_.end();
    for (auto it = seqs_.begin(); it != seqs_.end(); ++it)
      if (it->first != id && !it->second.blocks.empty() &&
          (lru == seqs_.end() || it->second.used < lru->second.used))
        lru = it;
    blocks_.release(lru->second.blocks);
    seqs_.erase(lru);
  }
  return blocks_.ensure(e.blocks, tokens);
}

void DraftKvBook::fed(int64_t id, std::span<const int32_t> tokens) {
  auto& t = seqs_.at(id).tokens;
  t.insert(t.end(), tokens.begin(), tokens.end());
}

void DraftKvBook::forget(int64_t id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  blocks_.release(it->second.blocks);
  seqs_.erase(it);
}

int64_t DraftKvBook::fed_count(int64_t id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : int64_t(it->second.tokens.size());
}

}  // namespace qmpi
