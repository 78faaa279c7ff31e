// The CUDA section of `qmpi doctor`. Without the CUDA backend it says so; with it but without a
// driver or device (a CPU machine) it says the backend is built and no device is present, and the
// job's other checks go on. With GPUs: driver vs runtime, NCCL, the devices and their memory
// already in use, CUDA_VISIBLE_DEVICES, ranks per host vs GPUs, the NVML link matrix with TP
// peers on slow links flagged, peer access, and the layout's memory against the GPUs.
#pragma once
#include <string>
#include <vector>

#include "doctor/comm_selftest.h"
#include "doctor/finding.h"
#include "model/config.h"
#include "model/shard_plan.h"
#include "plan/memory_model.h"

namespace qmpi::doctor {

// Devices in use by others beyond this much (a CUDA context is ~0.5 GiB) draw a warning.
inline constexpr uint64_t kGpuMemoryInUseWarn = uint64_t(1) << 30;

bool cuda_built();
// The CUDA runtime finds a driver and at least one device.
bool cuda_usable();

struct GpuHostInput {
  std::string host;
  int local_size = 1;  // ranks of the job on this host
  // Local ranks of each TP group that has two or more ranks on this host.
  std::vector<std::vector<int>> tp_groups;
  bool required = false;       // --backend cuda (a missing GPU is a FAIL, not a note)
  bool share_devices = false;  // --comm mpi: ranks may share GPUs
  const ModelConfig* cfg = nullptr;
  Layout layout;
  PlanInputs plan;  // backend, lengths, dtypes; gpu_mem is filled from the devices
};

// Host-level findings, from one rank per host.
std::vector<Finding> check_cuda_host(const GpuHostInput& in);

// This rank's device choice as the engine makes it (CUDA_VISIBLE_DEVICES, local rank): FAIL
// VisibleDevices when it cannot get one. Nothing on CPU runs.
std::vector<Finding> check_cuda_rank(int local_rank, int local_size, bool share_devices,
                                     const std::string& host);

// Points the self-test's TP groups at NCCL (or the staged MPI comm with `share_devices`) over
// device memory on this rank's device. Only with cuda_built() && cuda_usable().
void use_cuda_for_selftest(SelfTestSetup& setup, int local_rank, int local_size,
                           bool share_devices);

}  // namespace qmpi::doctor
