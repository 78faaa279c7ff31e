// The GPU link matrix and per-GPU memory use from NVML, loaded at run time with dlopen: the CUDA
// toolkit qmpi builds with ships no NVML library, and the driver's libnvidia-ml.so.1 exists only
// where a driver is installed. Without it `qmpi doctor` says "NVML not available" and goes on.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace qmpi::doctor {

// How two GPUs reach each other, fastest first (nvidia-smi topo -m's words).
enum class LinkLevel { Same, NvLink, Pix, Pxb, Phb, Node, Sys, Unknown };

// NVML's nvmlGpuTopologyLevel_t value (0, 10, 20, ..., 50) as a LinkLevel.
LinkLevel link_level_from_nvml(int nvml_topology_level);
// "NV4" (with the NVLink count), "PIX", "PXB", "PHB", "NODE", "SYS", "X", "?".
std::string link_name(LinkLevel level, int nvlinks);
// TP all-reduces on such a link cross the CPU interconnect (SYS): worth a warning.
bool link_is_slow_for_tp(LinkLevel level);

struct GpuMemoryUse {
  uint64_t total = 0, used = 0;
};

class Nvml {
 public:
  // Loads libnvidia-ml.so.1 and initialises NVML; nullptr (with the reason in `why_not`) when
  // either fails.
  static std::unique_ptr<Nvml> open(std::string* why_not);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  std::string driver_version() const;  // "570.86.15", "" when unknown
  int device_count() const;            // physical GPUs on the host, -1 when unknown
  // The NVML device of a CUDA PCI bus id ("0000:3b:00.0"), nullptr when not found.
  void* device_by_pci(const std::string& pci_bus_id) const;
  std::optional<GpuMemoryUse> memory(void* device) const;
  // The path between two devices, and the NVLinks joining them (0 when not NVLink).
  LinkLevel link(void* a, void* b, int* nvlinks) const;

  struct Api;

 private:
  explicit Nvml(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

}  // namespace qmpi::doctor
