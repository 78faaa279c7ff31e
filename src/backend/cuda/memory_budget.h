// How many KV-cache blocks a rank gets on its GPU: its share of --gpu-memory-utilization, less
// the weights, the workspace measured in a profiling step and the runtime overhead, and never
// more than the device has free. The arithmetic is a pure function (tested without a GPU); the
// *_on_device variant fills it from the live device and the backend's allocator counters.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/device_allocator.h"

namespace qmpi {
class CudaBackend;
}

namespace qmpi::cuda {

struct KvBudgetInput {
  uint64_t total_bytes = 0;      // device memory (cudaMemGetInfo)
  uint64_t free_bytes = 0;       // free now, with this rank's weights and workspace allocated
  double utilization = 0.9;      // --gpu-memory-utilization: share of the device the job may use
  int ranks_per_device = 1;      // ranks of the job sharing this device (--comm mpi)
  uint64_t weight_bytes = 0;     // this rank's weights on the device
  uint64_t workspace_bytes = 0;  // peak activations + scratch of a profiling step
  // CUDA context, kernels, cuBLAS/NCCL internals: plan/memory_model.h's kRuntimeOverheadCuda,
  // so the numbers match what `qmpi plan` predicts.
  uint64_t overhead_bytes = 0;
  uint64_t bytes_per_block = 0;  // KvCacheShape::bytes_per_block()
};

struct KvBudget {
  uint64_t rank_budget_bytes = 0;  // total x utilization / ranks_per_device
  uint64_t kv_bytes = 0;           // num_blocks x bytes_per_block
  int64_t num_blocks = 0;
  bool limited_by_free = false;  // another process holds memory: free memory set the limit
};

// Raises Err::Usage for a utilization outside (0, 1], Err::WeightsDoNotFit when weights,
// workspace and overhead exceed the rank's budget, Err::KvCacheDoesNotFit when not one block
// fits. Messages carry the numbers.
KvBudget plan_kv_blocks(const KvBudgetInput& in);

// The input from what the device and the allocator report after the profiling step, which
// held a throwaway KV cache of profile_kv_bytes (in the peak, but not workspace). The
// workspace is the peak of the activation buffers and scratch since reset_memory_peaks(), less
// that cache. Buffers of the step already freed again (the hidden states, the throwaway cache)
// come back when the engine runs, so free memory is counted without the workspace not held
// now.
KvBudgetInput kv_budget_input(const DeviceMemory& mem, const MemoryCounters& counters,
                              double utilization, int ranks_per_device, uint64_t overhead_bytes,
                              uint64_t bytes_per_block, uint64_t profile_kv_bytes);

struct DeviceKvBudget {
  KvBudgetInput input;  // what was measured
  KvBudget budget;
};

// The same from the live device: call after the weights are loaded and one profiling step at
// the largest batch has run, before the KV cache is allocated.
DeviceKvBudget plan_kv_blocks_on_device(const CudaBackend& backend, double utilization,
                                        int ranks_per_device, uint64_t overhead_bytes,
                                        uint64_t bytes_per_block, uint64_t profile_kv_bytes);

}  // namespace qmpi::cuda
