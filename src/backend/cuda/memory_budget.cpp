#include "backend/cuda/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_errors.h"
#include "core/errors.h"

namespace qmpi::cuda {

KvBudget plan_kv_blocks(const KvBudgetInput& in) {
  if (!(in.utilization > 0.0 && in.utilization <= 1.0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", in.utilization);
    raise(Err::Usage, std::string("--gpu-memory-utilization must be in (0, 1], not ") + buf,
          "Use e.g. --gpu-memory-utilization 0.9");
  }
  if (in.ranks_per_device < 1 || in.bytes_per_block == 0)
    raise(Err::Internal, "plan_kv_blocks: " + std::to_string(in.ranks_per_device) +
                             " ranks per device, " + std::to_string(in.bytes_per_block) +
                             " bytes per block");
  KvBudget b;
  b.rank_budget_bytes =
      uint64_t(double(in.total_bytes) * in.utilization) / uint64_t(in.ranks_per_device);
  const uint64_t fixed = in.weight_bytes + in.workspace_bytes + in.overhead_bytes;
  const std::string share = in.ranks_per_device > 1 ? " (1/" + std::to_string(in.ranks_per_device) +
                                                          " of the device per rank)"
                                                    : "";
  if (fixed > b.rank_budget_bytes)
    raise(Err::WeightsDoNotFit, "weights " + mib_text(in.weight_bytes) + " + workspace " +
                                    mib_text(in.workspace_bytes) + " + runtime overhead " +
                                    mib_text(in.overhead_bytes) + " exceed this rank's budget of " +
                                    mib_text(b.rank_budget_bytes) + share);
  uint64_t kv = b.rank_budget_bytes - fixed;
  // The weights and workspace are already allocated, so free memory is compared with the KV
  // cache alone; the overhead not yet taken (cuBLAS/NCCL growth) is kept free too.
  const uint64_t free_for_kv =
      in.free_bytes > in.overhead_bytes ? in.free_bytes - in.overhead_bytes : 0;
  if (free_for_kv < kv) {
    kv = free_for_kv;
    b.limited_by_free = true;
  }
  b.num_blocks = int64_t(kv / in.bytes_per_block);
  b.kv_bytes = uint64_t(b.num_blocks) * in.bytes_per_block;
  if (b.num_blocks < 1)
    raise(Err::KvCacheDoesNotFit,
          "one KV block needs " + mib_text(in.bytes_per_block) + " but only " + mib_text(kv) +
              " are left after the weights and workspace" +
              (b.limited_by_free ? " (another process holds memory on this GPU)" : share));
  return b;
}

KvBudgetInput kv_budget_input(const DeviceMemory& mem, const MemoryCounters& c, double utilization,
                              int ranks_per_device, uint64_t overhead_bytes,
                              uint64_t bytes_per_block, uint64_t profile_kv_bytes) {
  const auto sat_sub = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  KvBudgetInput in;
  in.total_bytes = mem.total_bytes;
  in.utilization = utilization;
  in.ranks_per_device = ranks_per_device;
  in.weight_bytes = c.used(MemPurpose::Weights);
  in.workspace_bytes =
      sat_sub(c.peak_of(MemPurpose::Buffers) + c.peak_of(MemPurpose::Scratch), profile_kv_bytes);
  const uint64_t held = c.used(MemPurpose::Buffers) + c.used(MemPurpose::Scratch);
  in.free_bytes = sat_sub(mem.free_bytes, sat_sub(in.workspace_bytes, held));
  in.overhead_bytes = overhead_bytes;
  in.bytes_per_block = bytes_per_block;
  return in;
}

DeviceKvBudget plan_kv_blocks_on_device(const CudaBackend& backend, double utilization,
                                        int ranks_per_device, uint64_t overhead_bytes,
                                        uint64_t bytes_per_block, uint64_t profile_kv_bytes) {
  DeviceKvBudget d;
  d.input = kv_budget_input(query_device_memory(), backend.memory_counters(), utilization,
                            ranks_per_device, overhead_bytes, bytes_per_block, profile_kv_bytes);
  d.budget = plan_kv_blocks(d.input);
  return d;
}

}  // namespace qmpi::cuda
