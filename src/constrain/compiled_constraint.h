// A compiled constraint ready for decoding: its grammar's automaton over the vocabulary index,
// with the token mask of each state computed by one trie walk and kept in a bounded cache
// (states repeat: inside a JSON string the state is the same at every character). Every
// call takes the lock: sequences of several requests share one compiled constraint.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "constrain/automaton.h"
#include "constrain/vocab_index.h"

namespace qmpi {

constexpr size_t kMaskCacheStates = 512;  // masks kept per compiled constraint

// Where a sequence is in a constraint: the automaton's node set survives a state-table clear.
struct GrammarPosition {
  std::vector<int32_t> nodes;
  bool accept = false;
  bool dead = false;  // a token the grammar rejects was fed (never, when masks are applied)
};

class CompiledConstraint {
 public:
  CompiledConstraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabIndex> vocab);

  GrammarPosition start();
  // After the bytes of `token`.
  void advance(GrammarPosition& at, int32_t token);
  // The allowed ids at `at`, stop ids excluded; accepting() says whether the end may come.
  std::shared_ptr<const std::vector<uint64_t>> mask(const GrammarPosition& at);
  // Whether `text` (bytes) is a complete match, for tests.
  bool matches(std::string_view text);

  const VocabIndex& vocab() const { return *vocab_; }
  struct Stats {
    uint64_t masks_computed = 0, mask_hits = 0;
    double compute_seconds = 0;
  };
  Stats stats() const;
  size_t grammar_size() const { return grammar_->size(); }

 private:
  int32_t state_of(const GrammarPosition& at);
  std::vector<uint64_t> walk(int32_t state);

  mutable std::mutex mu_;
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabIndex> vocab_;
  Automaton automaton_;
  std::list<int32_t> lru_;  // states, most recent first
  std::unordered_map<int32_t, std::pair<std::shared_ptr<const std::vector<uint64_t>>,
                                        std::list<int32_t>::iterator>>
      masks_;
  Stats stats_;
};

}  // namespace qmpi
