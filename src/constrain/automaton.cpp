#include "constrain/automaton.h"

#include <algorithm>

#include "core/errors.h"

namespace qmpi {
namespace {

uint64_t hash_nodes(const std::vector<int32_t>& nodes, bool accept) {
  uint64_t h = accept ? 0x9e3779b97f4a7c15ull : 0x2545f4914f6cdd1dull;
  for (int32_t n : nodes) h = (h ^ uint64_t(uint32_t(n))) * 0x100000001b3ull + (h >> 29);
  return h;
}

}  // namespace

Automaton::Automaton(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  std::vector<int32_t> terms;
  bool accept = false;
  for (uint32_t a : g_->alternatives(g_->root())) {
    const Closure& c = closure(node(a, -1));
    terms.insert(terms.end(), c.terms.begin(), c.terms.end());
    accept = accept || c.accept;
  }
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  start_nodes_ = terms;
  start_accept_ = accept;
  start_ = intern(std::move(terms), accept);
}

int32_t Automaton::node(uint32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t(pos) << 32) | uint32_t(parent);
  const auto [it, fresh] = node_ids_.emplace(key, int32_t(nodes_.size()));
  if (fresh) {
    nodes_.push_back({pos, parent});
    closures_.emplace_back();
  }
  return it->second;
}

// Where node `n` can be next: the byte-class positions reachable through rule calls and
// returns without consuming a byte (left recursion, which would loop, is refused by finish()).
const Automaton::Closure& Automaton::closure(int32_t n) {
  if (closures_[size_t(n)].done) return closures_[size_t(n)];
  Closure c;
  const Node nd = nodes_[size_t(n)];
  const Grammar::Elem e = g_->elems()[nd.pos];
  switch (e.kind) {
    case Grammar::Elem::Kind::Term:
      c.terms = {n};
      break;
    case Grammar::Elem::Kind::End:
      if (nd.parent < 0) {
        c.accept = true;
      } else {
        const Closure& p = closure(nd.parent);
        c.terms = p.terms;
        c.accept = p.accept;
      }
      break;
    case Grammar::Elem::Kind::Ref: {
      const bool tail = g_->elems()[nd.pos + 1].kind == Grammar::Elem::Kind::End;
      const int32_t cont = tail ? nd.parent : node(nd.pos + 1, nd.parent);
      for (uint32_t a : g_->alternatives(e.arg)) {
        const int32_t start = node(a, cont);
        const Closure& sub = closure(start);
        c.terms.insert(c.terms.end(), sub.terms.begin(), sub.terms.end());
        c.accept = c.accept || sub.accept;
      }
      std::sort(c.terms.begin(), c.terms.end());
      c.terms.erase(std::unique(c.terms.begin(), c.terms.end()), c.terms.end());
      break;
    }
  }
  c.done = true;
  closures_[size_t(n)] = std::move(c);
  return closures_[size_t(n)];
}

int32_t Automaton::intern(std::vector<int32_t> nodes, bool accept) {
  if (nodes.empty() && !accept) return kDead;
  auto& bucket = state_ids_[hash_nodes(nodes, accept)];
  for (int32_t id : bucket)
    if (states_[size_t(id)].accept == accept && states_[size_t(id)].nodes == nodes) return id;
  State s;
  s.nodes = std::move(nodes);
  s.accept = accept;
  states_.push_back(std::move(s));
  bucket.push_back(int32_t(states_.size() - 1));
  return int32_t(states_.size() - 1);
}

void Automaton::reset() {
  states_.clear();
  state_ids_.clear();
  start_ = intern(start_nodes_, start_accept_);
}

int32_t Automaton::step(int32_t state, uint8_t byte) {
  State& s = states_[size_t(state)];
  if (s.next && (*s.next)[byte] != -2) return (*s.next)[byte];
  std::vector<int32_t> terms;
  bool accept = false;
  for (int32_t n : s.nodes) {
    const Node nd = nodes_[size_t(n)];
    if (!g_->sets()[size_t(g_->elems()[nd.pos].arg)].test(byte)) continue;
    const Closure& c = closure(node(nd.pos + 1, nd.parent));
    terms.insert(terms.end(), c.terms.begin(), c.terms.end());
    accept = accept || c.accept;
  }
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  const int32_t to = intern(std::move(terms), accept);
  // `s` may have moved when intern() grew the table.
  State& from = states_[size_t(state)];
  if (!from.next) {
    from.next = std::make_unique<std::array<int32_t, 256>>();
    from.next->fill(-2);
  }
  (*from.next)[byte] = to;
  return to;
}

}  // namespace qmpi
