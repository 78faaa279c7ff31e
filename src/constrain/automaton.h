// Matches bytes against a finished Grammar: a pushdown matcher whose configurations (the set
// of rule stacks still alive) are interned as states, with transitions built lazily and
// memoized, so it runs as a DFA wherever the grammar is regular and still handles recursion
// (nested JSON, recursive $refs, GBNF). Stacks are shared linked nodes; a rule call in tail
// position reuses its caller's node, so repetition (x*) keeps the stack depth constant.
//
// States are only a cache: a sequence keeps its node set (GrammarPosition) and re-interns it,
// so the table can be cleared when it grows past kMaxAutomatonStates. Not thread-safe: rank 0's
// scheduler thread is its only user (the compiled-constraint cache hands it out under a lock).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "constrain/grammar.h"

namespace qmpi {

constexpr size_t kMaxAutomatonStates = 1 << 16;

class Automaton {
 public:
  static constexpr int32_t kDead = -1;

  explicit Automaton(std::shared_ptr<const Grammar> g);

  int32_t start() const { return start_; }
  // The state after `byte`, or kDead.
  int32_t step(int32_t state, uint8_t byte);
  bool accepts(int32_t state) const { return states_[size_t(state)].accept; }
  // No byte can follow (only the end can).
  bool finished(int32_t state) const { return states_[size_t(state)].nodes.empty(); }
  size_t num_states() const { return states_.size(); }
  size_t num_nodes() const { return nodes_.size(); }
  // A state's node set, to carry across a clear, and the state for such a set.
  const std::vector<int32_t>& nodes_of(int32_t state) const { return states_[size_t(state)].nodes; }
  bool accept_of(int32_t state) const { return states_[size_t(state)].accept; }
  int32_t intern(std::vector<int32_t> nodes, bool accept);
  // Forgets every state (ids of the old epoch become stale); the nodes stay.
  void reset();

 private:
  struct Node {
    uint32_t pos;    // the element to match next
    int32_t parent;  // where to continue after this rule's End (-1: the root's end)
  };
  struct Closure {
    std::vector<int32_t> terms;  // nodes whose next element is a byte class
    bool accept = false;
    bool done = false;
  };
  struct State {
    std::vector<int32_t> nodes;  // sorted, each at a Term
    bool accept = false;
    std::unique_ptr<std::array<int32_t, 256>> next;  // lazily; -2 = not computed
  };
  int32_t node(uint32_t pos, int32_t parent);
  const Closure& closure(int32_t n);

  std::shared_ptr<const Grammar> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<Closure> closures_;  // per node
  std::vector<State> states_;
  std::unordered_map<uint64_t, std::vector<int32_t>> state_ids_;  // by hash of the node set
  int32_t start_ = kDead;
  std::vector<int32_t> start_nodes_;
  bool start_accept_ = false;
};

}  // namespace qmpi
