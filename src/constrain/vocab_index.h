// The vocabulary as a byte trie, for computing which tokens a grammar state admits: one walk
// from the root visits each prefix once, and a prefix the automaton rejects cuts off every
// token under it. Built once per tokenizer from the byte-level decoding of each id; special
// tokens are left out (they are never allowed, except the stop ids a constraint adds where it
// accepts).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qmpi {

class Tokenizer;

class VocabIndex {
 public:
  struct Node {
    uint32_t first_child = 0, num_children = 0;
    uint32_t tokens_begin = 0, tokens_end = 0;  // into tokens(): ids whose bytes end here
    uint8_t byte = 0;
  };

  // bytes[id]: the id's bytes, nullopt-like empty for ids that are never allowed. `rows`: the
  // model's vocabulary rows (the bitset's size), at least bytes.size().
  VocabIndex(const std::vector<std::string>& bytes, int64_t rows);
  static std::shared_ptr<const VocabIndex> from_tokenizer(const Tokenizer& tok, int64_t rows);
  // The process's index of `tok`, built on first use (every constrained request shares it).
  static std::shared_ptr<const VocabIndex> shared(const Tokenizer& tok, int64_t rows);

  int64_t rows() const { return rows_; }
  size_t words() const { return size_t((rows_ + 63) / 64); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // The bytes of `id` ("" for ids left out).
  std::string_view bytes(int32_t id) const;

 private:
  void build(uint32_t at, const std::vector<int32_t>& order, size_t lo, size_t hi, size_t depth);

  int64_t rows_ = 0;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
  std::vector<int32_t> tokens_;
};

}  // namespace qmpi
