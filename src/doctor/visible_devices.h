// CUDA_VISIBLE_DEVICES sanity. The CUDA runtime reads the list up to the first entry it cannot
// use (out of range, a duplicate, an unknown UUID) and silently ignores that entry and every one
// after it, so a typo shows up much later as a rank on the wrong GPU or too few devices.
#pragma once
#include <string>
#include <vector>

namespace qmpi::doctor {

struct VisibleDevicesProblem {
  std::string message;
  std::string fix;
};

// `value` is the variable (nullptr when unset); `runtime_count` the devices the CUDA runtime
// reports; `physical_count` the devices on the host (NVML), or -1 when unknown. Returns one
// problem per duplicate, out-of-range or ignored entry; empty when the list is sound.
std::vector<VisibleDevicesProblem> check_visible_devices(const char* value, int runtime_count,
                                                         int physical_count);

}  // namespace qmpi::doctor
