// Finding and selecting the GPU: a probe that never throws (for `qmpi doctor`), the checked
// selection the CUDA backend uses, and the device's memory.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/errors.h"

namespace qmpi::cuda {

struct CudaProbe {
  int device_count = 0;
  int driver_version = 0;   // 0: no driver loaded
  int runtime_version = 0;  // the CUDA runtime qmpi was built with, e.g. 13000
  bool usable = false;
  Err error = Err::NoGpu;  // when !usable
  std::string message;     // when !usable: the sentence the backend would raise
};

// What the CUDA runtime sees, without throwing or creating a context on any device.
CudaProbe probe_cuda();

// Number of visible devices; raises NoGpu / DriverTooOld (with the probe's sentence) when none
// can be used.
int cuda_device_count();

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  uint64_t total_bytes = 0;
  int driver_version = 0;
  int runtime_version = 0;
  std::string pci;  // bus id, e.g. "0000:1B:00.0" (matches NVML's view of the device)
};

// What the runtime says of visible device `index`, without selecting it; nullopt when it cannot
// be read.
std::optional<CudaDeviceInfo> read_cuda_device(int index);

// Makes `index` this thread's device. Raises NoGpu / DriverTooOld, or VisibleDevices when
// `index` is not among the visible devices.
CudaDeviceInfo select_cuda_device(int index);

// The current device's free and total memory (cudaMemGetInfo), as the driver sees it: free
// already excludes what every process on the device holds.
struct DeviceMemory {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};
DeviceMemory query_device_memory();

}  // namespace qmpi::cuda
