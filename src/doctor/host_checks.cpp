#include "doctor/host_checks.h"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include "core/byte_size.h"
#include "plan/planner.h"

namespace qmpi::doctor {

HostLimits read_host_limits() {
  HostLimits h;
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) == 0) {
    h.shm_present = true;
    h.shm_bytes = uint64_t(fs.f_blocks) * fs.f_frsize;
    h.shm_free = uint64_t(fs.f_bavail) * fs.f_frsize;
  }
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    h.open_files_soft = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : uint64_t(rl.rlim_cur);
    h.open_files_hard = rl.rlim_max == RLIM_INFINITY ? UINT64_MAX : uint64_t(rl.rlim_max);
  }
  h.mem_available = host_available_memory();
  return h;
}

std::vector<Finding> host_limit_findings(const HostLimits& h) {
  std::vector<Finding> out;
  if (!h.shm_present) {
    out.push_back(warn("host", Err::HostLimits,
                       "/dev/shm is not mounted; MPI and NCCL keep their shared-memory segments "
                       "there"));
  } else if (h.shm_bytes < kMinShmBytes) {
    out.push_back(warn("host", Err::HostLimits,
                       "/dev/shm is " + format_bytes(h.shm_bytes) + ", under the " +
                           format_bytes(kMinShmBytes) + " that NCCL and MPI shared memory need"));
  } else {
    out.push_back(ok("host", "/dev/shm: " + format_bytes(h.shm_bytes) + " (" +
                                 format_bytes(h.shm_free) + " free)"));
  }
  auto limit = [](uint64_t v) {
    return v == UINT64_MAX ? std::string("unlimited") : std::to_string(v);
  };
  if (h.open_files_soft < kMinOpenFiles) {
    const bool can_raise = h.open_files_hard >= kMinOpenFiles;
    out.push_back(warn("host", Err::HostLimits,
                       "the open-file limit is " + limit(h.open_files_soft) + " (hard limit " +
                           limit(h.open_files_hard) + "), under " + std::to_string(kMinOpenFiles),
                       can_raise
                           ? "Raise it before launching: `ulimit -n " + limit(h.open_files_hard) +
                                 "` (in the job script, or pass it through the launcher)."
                           : std::string()));
  } else {
    out.push_back(ok("host", "open-file limit: " + limit(h.open_files_soft) + " (hard " +
                                 limit(h.open_files_hard) + ")"));
  }
  return out;
}

std::vector<Finding> memory_findings(const std::string& section, const ModelConfig& cfg,
                                     const Layout& layout, const PlanInputs& in,
                                     const std::string& budget_source) {
  const LayoutVerdict v = evaluate_layout(cfg, layout, in);
  if (!v.valid) return {};
  const RankMemory& r = v.biggest_rank();
  const std::string who = layout_flags(layout);
  if (!v.fits) {
    // The launch's own pre-flight verdict, with the planner's way out as the fix.
    try {
      preflight(cfg, layout, in);
    } catch (const Error& e) {
      return {fail(section, e)};
    }
    return {fail(section, v.memory_code, memory_sentence(v, in))};
  }
  return {ok(section, "memory for " + who + ": the biggest rank (rank " + std::to_string(r.rank) +
                          ", stage " + std::to_string(r.stage) + ") needs " +
                          format_bytes(r.total()) + " (weights " + format_bytes(r.weights) +
                          ", KV cache " + format_bytes(r.kv_cache) + ", activations " +
                          format_bytes(r.activations) + ", runtime " + format_bytes(r.overhead) +
                          ") of the " + format_bytes(v.budget) + " each rank has (" +
                          budget_source + ")")};
}

}  // namespace qmpi::doctor
