// The seam through which the Engine sizes its KV cache on a device backend without linking it:
// the app fills BackendConfig::size_kv_on_device (CUDA) and the Engine hands it the backend,
// what it asks for and a profiling step to run. Also what a rank measured, for the
// predicted-vs-actual line printed at start (plan/memory_report.h).
#pragma once
#include <cstdint>
#include <functional>

namespace qmpi {

class Backend;

struct DeviceKvRequest {
  double utilization = 0.9;  // --gpu-memory-utilization
  int ranks_per_device = 1;  // ranks of the job on this rank's device (--comm mpi)
  uint64_t bytes_per_block = 0;
  // The throwaway KV cache the profiling step holds: in the measured peak, but not workspace.
  uint64_t profile_kv_bytes = 0;
};

// One rank's memory as it stands when its KV cache is allocated. Device fields stay 0 where
// nothing was measured (CPU, or a cache sized by --kv-blocks).
struct MeasuredMemory {
  bool device = false;           // the KV cache was sized from the device's memory
  uint64_t total_bytes = 0;      // device memory
  uint64_t free_bytes = 0;       // free before the KV cache (less workspace not held just then)
  uint64_t weight_bytes = 0;     // allocator count on a device, loader count on CPU
  uint64_t workspace_bytes = 0;  // peak activations + scratch of the profiling step
  uint64_t overhead_bytes = 0;   // reserved for the runtime (not measurable)
  uint64_t rank_budget_bytes = 0;
  bool limited_by_free = false;  // another process held memory: free memory set the limit
  int64_t profile_tokens = 0;    // tokens of the profiling step
  int64_t rank_kv_blocks = 0;    // blocks this rank has room for
  int64_t kv_blocks = 0;         // blocks allocated: the smallest room of any rank
  uint64_t bytes_per_block = 0;
};

// Resets the backend's memory peaks, runs `profile_step` (the largest step the engine will
// run) and returns the measured numbers with rank_kv_blocks set. Raises the catalogue's error
// when not one block fits.
using DeviceKvSizer = std::function<MeasuredMemory(Backend& backend, const DeviceKvRequest& request,
                                                   const std::function<void()>& profile_step)>;

}  // namespace qmpi
