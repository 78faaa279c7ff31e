#include "constrain/compiled_constraint.h"

#include <chrono>

namespace qmpi {

CompiledConstraint::CompiledConstraint(std::shared_ptr<const Grammar> g,
                                       std::shared_ptr<const VocabIndex> vocab)
    : grammar_(std::move(g)), vocab_(std::move(vocab)), automaton_(grammar_) {}

GrammarPosition CompiledConstraint::start() {
  std::lock_guard lock(mu_);
  const int32_t s = automaton_.start();
  return {automaton_.nodes_of(s), automaton_.accept_of(s), false};
}

int32_t CompiledConstraint::state_of(const GrammarPosition& at) {
  if (automaton_.num_states() > kMaxAutomatonStates) {
    // A grammar whose walks keep making states (deep recursion): start the table afresh.
    automaton_.reset();
    masks_.clear();
    lru_.clear();
  }
  return automaton_.intern(at.nodes, at.accept);
}

void CompiledConstraint::advance(GrammarPosition& at, int32_t token) {
  std::lock_guard lock(mu_);
  if (at.dead) return;
  int32_t s = state_of(at);
  for (char c : vocab_->bytes(token)) {
    s = automaton_.step(s, uint8_t(c));
    if (s == Automaton::kDead) {
      at.dead = true;
      return;
    }
  }
  at.nodes = automaton_.nodes_of(s);
  at.accept = automaton_.accept_of(s);
}

bool CompiledConstraint::matches(std::string_view text) {
  std::lock_guard lock(mu_);
  GrammarPosition at{automaton_.nodes_of(automaton_.start()),
                     automaton_.accept_of(automaton_.start())};
  int32_t s = state_of(at);
  for (char c : text) {
    s = automaton_.step(s, uint8_t(c));
    if (s == Automaton::kDead) return false;
  }
  return automaton_.accepts(s);
}

// One walk of the vocabulary trie from `state`: a child prefix the automaton rejects is not
// entered, so the cost is the number of admitted prefixes.
std::vector<uint64_t> CompiledConstraint::walk(int32_t state) {
  std::vector<uint64_t> bits(vocab_->words(), 0);
  const auto& nodes = vocab_->nodes();
  const auto& tokens = vocab_->tokens();
  std::vector<std::pair<uint32_t, int32_t>> stack = {{0, state}};
  while (!stack.empty()) {
    const auto [n, s] = stack.back();
    stack.pop_back();
    const VocabIndex::Node& node = nodes[n];
    for (uint32_t c = node.first_child; c < node.first_child + node.num_children; ++c) {
      const int32_t next = automaton_.step(s, nodes[c].byte);
      if (next == Automaton::kDead) continue;
      for (uint32_t t = nodes[c].tokens_begin; t < nodes[c].tokens_end; ++t)
        bits[size_t(tokens[t]) / 64] |= uint64_t(1) << (tokens[t] % 64);
      if (nodes[c].num_children) stack.push_back({c, next});
    }
  }
  return bits;
}

std::shared_ptr<const std::vector<uint64_t>> CompiledConstraint::mask(const GrammarPosition& at) {
  std::lock_guard lock(mu_);
  const int32_t s = state_of(at);
  if (const auto it = masks_.find(s); it != masks_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
    ++stats_.mask_hits;
    return it->second.first;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_shared<const std::vector<uint64_t>>(walk(s));
  stats_.compute_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_.masks_computed;
  // walk() may have cleared nothing (only state_of clears), so `s` is still this epoch's id.
  if (masks_.size() >= kMaskCacheStates) {
    masks_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(s);
  masks_.emplace(s, std::make_pair(m, lru_.begin()));
  return m;
}

CompiledConstraint::Stats CompiledConstraint::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace qmpi
