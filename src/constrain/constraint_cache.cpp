#include "constrain/constraint_cache.h"

#include <chrono>

namespace qmpi {

std::shared_ptr<CompiledConstraint> ConstraintCache::get(
    const ConstraintSource& src, const std::shared_ptr<const VocabIndex>& vocab) {
  // The vocabulary's address is part of the key: tests build several.
  std::string key =
      std::to_string(uintptr_t(vocab.get())) + ":" + std::to_string(int(src.kind)) + ":" + src.text;
  {
    std::lock_guard lock(mu_);
    if (const auto it = entries_.find(key); it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      ++stats_.hits;
      return it->second.compiled;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto compiled = std::make_shared<CompiledConstraint>(compile_grammar(src), vocab);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard lock(mu_);
  ++stats_.misses;
  stats_.compile_seconds += took;
  if (entries_.count(key)) return entries_.at(key).compiled;  // compiled meanwhile elsewhere
  if (entries_.size() >= capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  entries_.emplace(std::move(key), Entry{compiled, lru_.begin()});
  return compiled;
}

ConstraintCacheStats ConstraintCache::stats() const {
  std::lock_guard lock(mu_);
  ConstraintCacheStats s = stats_;
  s.entries = entries_.size();
  for (const auto& [k, e] : entries_) {
    const auto m = e.compiled->stats();
    s.masks_computed += m.masks_computed;
    s.mask_hits += m.mask_hits;
    s.mask_seconds += m.compute_seconds;
  }
  return s;
}

ConstraintCache& constraint_cache() {
  static ConstraintCache cache;
  return cache;
}

}  // namespace qmpi
