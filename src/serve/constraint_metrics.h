// The structured-output lines of /metrics: the compiled-constraint cache (hits, misses,
// entries, compile time) and the token masks computed for it.
#pragma once
#include <string>

#include "constrain/constraint_cache.h"

namespace qmpi {

void render_constraint_metrics(const ConstraintCacheStats& s, std::string& out);

}  // namespace qmpi
