// Host checks of `qmpi doctor`, run once per host: the shared-memory file system and the
// open-file limit MPI and NCCL depend on, and whether the biggest rank of the layout fits the
// memory the ranks of a host share (the CPU backend's budget).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "plan/memory_model.h"

namespace qmpi::doctor {

// Below these, multi-rank jobs fail part-way through (Err::HostLimits).
inline constexpr uint64_t kMinShmBytes = uint64_t(1) << 30;
inline constexpr uint64_t kMinOpenFiles = 4096;

struct HostLimits {
  bool shm_present = false;
  uint64_t shm_bytes = 0;  // size of the /dev/shm file system
  uint64_t shm_free = 0;
  uint64_t open_files_soft = 0, open_files_hard = 0;  // RLIM_INFINITY as UINT64_MAX
  uint64_t mem_available = 0;                         // MemAvailable, 0 when unknown
};

HostLimits read_host_limits();
std::vector<Finding> host_limit_findings(const HostLimits& limits);

// The layout's biggest rank against its budget (the planner's evaluate_layout): OK with the
// numbers, or FAIL WeightsDoNotFit / KvCacheDoesNotFit with the planner's sentence and way out.
// `budget_source` says where the budget came from, e.g. "MemAvailable 22.1 GiB / 6 ranks".
// Nothing for a layout the model cannot run (the mpi section reports that).
std::vector<Finding> memory_findings(const std::string& section, const ModelConfig& cfg,
                                     const Layout& layout, const PlanInputs& in,
                                     const std::string& budget_source);

}  // namespace qmpi::doctor
