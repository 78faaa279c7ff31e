// Byte-level BPE: a piece's bytes start as one symbol each and the pair with the lowest merge
// rank (leftmost first among equals) is merged until no pair has a rank. A heap over a linked
// list of symbols keeps this O(n log n), so a 50,000-byte piece costs milliseconds, and results
// for short pieces are cached because text repeats its words.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/string_map.h"

namespace qmpi {

class Bpe {
 public:
  struct Merge {
    int32_t rank;
    int32_t result;  // id of the merged symbol
  };

  // `byte_ids[b]` is the id of the single-byte symbol b; `merges` maps pair_key(left, right).
  // With `ignore_merges`, a piece that is whole in `whole_pieces` (raw bytes -> id) is one token.
  Bpe(std::array<int32_t, 256> byte_ids, std::unordered_map<uint64_t, Merge> merges,
      bool ignore_merges, StringMap<int32_t> whole_pieces);

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // Appends the ids of `piece` (raw bytes) to `out`. Thread-safe.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_;
  StringMap<int32_t> whole_pieces_;

  // Pieces up to kCacheMaxBytes long; emptied when it reaches kCacheMaxEntries.
  static constexpr size_t kCacheMaxBytes = 128;
  static constexpr size_t kCacheMaxEntries = 1 << 16;
  mutable std::mutex cache_mu_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace qmpi
