#include "serve/constraint_metrics.h"

#include <fmt/format.h>

namespace qmpi {

void render_constraint_metrics(const ConstraintCacheStats& s, std::string& out) {
  const auto line = [&](const char* name, const char* type, const char* help, double v) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, v);
  };
  line("qmpi_constraint_cache_hits_total", "counter",
       "Structured-output requests whose constraint was already compiled.", double(s.hits));
  line("qmpi_constraint_cache_misses_total", "counter",
       "Structured-output constraints compiled (cache misses).", double(s.misses));
  line("qmpi_constraint_cache_entries", "gauge", "Compiled constraints held (at most 64).",
       double(s.entries));
  line("qmpi_constraint_compile_seconds_total", "counter", "Time spent compiling constraints.",
       s.compile_seconds);
  line("qmpi_constraint_masks_computed_total", "counter",
       "Token masks computed by a vocabulary walk (for the constraints cached now).",
       double(s.masks_computed));
  line("qmpi_constraint_mask_cache_hits_total", "counter",
       "Token masks found in a constraint's mask cache (for the constraints cached now).",
       double(s.mask_hits));
  line("qmpi_constraint_mask_seconds_total", "counter",
       "Time spent computing token masks (for the constraints cached now).", s.mask_seconds);
}

}  // namespace qmpi
