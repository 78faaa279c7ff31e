// Compiled constraints by their source text, so that a schema sent with every request is
// compiled once: a bounded LRU cache (kConstraintCacheEntries), reported in /metrics. One per
// process (rank 0), over one vocabulary.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "constrain/compiled_constraint.h"
#include "constrain/constraint_source.h"

namespace qmpi {

constexpr size_t kConstraintCacheEntries = 64;

struct ConstraintCacheStats {
  uint64_t hits = 0, misses = 0, entries = 0;
  double compile_seconds = 0;
  uint64_t masks_computed = 0, mask_hits = 0;  // over the entries now cached
  double mask_seconds = 0;
};

class ConstraintCache {
 public:
  explicit ConstraintCache(size_t capacity = kConstraintCacheEntries) : capacity_(capacity) {}
  // The compiled form of `src` over `vocab` (compiled now on a miss; RequestField,
  // FieldUnsupported for a bad source, which is not cached).
  std::shared_ptr<CompiledConstraint> get(const ConstraintSource& src,
                                          const std::shared_ptr<const VocabIndex>& vocab);
  ConstraintCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<CompiledConstraint> compiled;
    std::list<std::string>::iterator lru;
  };
  mutable std::mutex mu_;
  size_t capacity_;
  std::list<std::string> lru_;  // keys, most recent first
  std::unordered_map<std::string, Entry> entries_;
  ConstraintCacheStats stats_;
};

// The process's cache.
ConstraintCache& constraint_cache();

}  // namespace qmpi
