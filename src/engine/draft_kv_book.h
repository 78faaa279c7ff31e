// Which of a draft model's KV cache blocks hold which sequence's tokens, on rank 0
// (draft_model_proposer.h). The draft keeps, per sequence, the tokens it has fed so far; before
// each proposal the sequence's prompt and output are compared with them and only the common
// prefix is kept: guesses the target rejected (and anything else that no longer matches) simply
// fall off, and their blocks go back. So the draft needs no rollback message from the verifier.
//
// The cache has a fixed number of blocks. A sequence that needs more than are free takes them
// from the sequences that proposed least recently (their state is dropped; they prefill again
// the next time), so the cache never grows; one that cannot fit even alone gets no blocks.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"

namespace qmpi {

class DraftKvBook {
 public:
  DraftKvBook(int64_t num_blocks, int block_size);

  // Keeps the longest prefix of `id`'s fed tokens that `context` starts with, but at most
  // context.size() - 1 tokens (the last one is always fed again: its logits give the first
  // guess), and frees the blocks past it. Returns how many tokens were kept.
  int64_t keep_prefix(int64_t id, std::span<const int32_t> context);
  // Blocks for `tokens` positions of `id`, evicting the least recently used other sequences when
  // too few are free. False, with `id`'s state dropped, when the whole cache is too small.
  bool reserve(int64_t id, int64_t tokens);
  // `tokens` have been written into `id`'s cache after those fed before.
  void fed(int64_t id, std::span<const int32_t> tokens);
  void forget(int64_t id);

  const std::vector<int32_t>& table(int64_t id) const { return seqs_.at(id).blocks; }
  int64_t fed_count(int64_t id) const;
  size_t sequences() const { return seqs_.size(); }
  int64_t free_blocks() const { return blocks_.free_blocks(); }
  int64_t num_blocks() const { return blocks_.num_blocks(); }
  int block_size() const { return blocks_.block_size(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;  // fed, in order: their KV is in the cache
    std::vector<int32_t> blocks;  // block table
    uint64_t used = 0;            // when it last proposed (a counter)
  };
  void shrink(Entry& e, int64_t tokens);

  BlockManager blocks_;
  std::unordered_map<int64_t, Entry> seqs_;
  uint64_t clock_ = 0;
};

}  // namespace qmpi
