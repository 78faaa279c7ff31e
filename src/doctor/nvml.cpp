#include "doctor/nvml.h"

#include <dlfcn.h>

#include <cstring>

namespace qmpi::doctor {
namespace {

// The few NVML declarations used here (nvml.h is not part of the toolkit on the build machine);
// layouts and values as the NVML API reference documents them.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kP2pCapsNvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kP2pStatusOk = 0;    // NVML_P2P_STATUS_OK
constexpr unsigned kMaxNvlinks = 18;

struct NvmlMemory {  // nvmlMemory_t (v1)
  unsigned long long total, free, used;
};
struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

template <typename Fn>
bool load(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

bool same_pci(const NvmlPciInfo& a, const NvmlPciInfo& b) {
  return a.domain == b.domain && a.bus == b.bus && a.device == b.device;
}

}  // namespace

struct Nvml::Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;

  ~Api() {
    if (lib) dlclose(lib);
  }
};

LinkLevel link_level_from_nvml(int level) {
  switch (level) {
    case 0:
      return LinkLevel::Same;  // NVML_TOPOLOGY_INTERNAL
    case 10:
      return LinkLevel::Pix;  // NVML_TOPOLOGY_SINGLE: one PCIe switch
    case 20:
      return LinkLevel::Pxb;  // NVML_TOPOLOGY_MULTIPLE: several PCIe switches
    case 30:
      return LinkLevel::Phb;  // NVML_TOPOLOGY_HOSTBRIDGE
    case 40:
      return LinkLevel::Node;  // NVML_TOPOLOGY_NODE: host bridges of one NUMA node
    case 50:
      return LinkLevel::Sys;  // NVML_TOPOLOGY_SYSTEM: across NUMA nodes (QPI/UPI/xGMI)
    default:
      return LinkLevel::Unknown;
  }
}

std::string link_name(LinkLevel level, int nvlinks) {
  switch (level) {
    case LinkLevel::Same:
      return "X";
    case LinkLevel::NvLink:
      return "NV" + std::to_string(nvlinks);
    case LinkLevel::Pix:
      return "PIX";
    case LinkLevel::Pxb:
      return "PXB";
    case LinkLevel::Phb:
      return "PHB";
    case LinkLevel::Node:
      return "NODE";
    case LinkLevel::Sys:
      return "SYS";
    case LinkLevel::Unknown:
      return "?";
  }
  return "?";
}

bool link_is_slow_for_tp(LinkLevel level) {
  return level == LinkLevel::Sys;
}

std::unique_ptr<Nvml> Nvml::open(std::string* why_not) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    if (why_not) *why_not = dlerror();
    return nullptr;
  }
  Api& a = *api;
  const bool complete = load(a.lib, "nvmlInit_v2", a.init) &&
                        load(a.lib, "nvmlShutdown", a.shutdown) &&
                        load(a.lib, "nvmlErrorString", a.error_string) &&
                        load(a.lib, "nvmlSystemGetDriverVersion", a.driver_version) &&
                        load(a.lib, "nvmlDeviceGetCount_v2", a.count) &&
                        load(a.lib, "nvmlDeviceGetHandleByPciBusId_v2", a.by_pci) &&
                        load(a.lib, "nvmlDeviceGetMemoryInfo", a.memory) &&
                        load(a.lib, "nvmlDeviceGetPciInfo_v3", a.pci_info) &&
                        load(a.lib, "nvmlDeviceGetTopologyCommonAncestor", a.ancestor) &&
                        load(a.lib, "nvmlDeviceGetP2PStatus", a.p2p_status) &&
                        load(a.lib, "nvmlDeviceGetNvLinkState", a.nvlink_state) &&
                        load(a.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", a.nvlink_remote_pci);
  if (!complete) {
    if (why_not) *why_not = "libnvidia-ml.so.1 lacks a function qmpi needs (driver too old)";
    return nullptr;
  }
  if (const nvmlReturn_t rc = a.init(); rc != kNvmlSuccess) {
    if (why_not) *why_not = std::string("nvmlInit failed: ") + a.error_string(rc);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(std::move(api)));
}

Nvml::Nvml(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
}

std::string Nvml::driver_version() const {
  char buf[96] = {};
  return api_->driver_version(buf, sizeof buf) == kNvmlSuccess ? buf : "";
}

int Nvml::device_count() const {
  unsigned n = 0;
  return api_->count(&n) == kNvmlSuccess ? int(n) : -1;
}

void* Nvml::device_by_pci(const std::string& pci_bus_id) const {
  nvmlDevice_t d = nullptr;
  return api_->by_pci(pci_bus_id.c_str(), &d) == kNvmlSuccess ? d : nullptr;
}

std::optional<GpuMemoryUse> Nvml::memory(void* device) const {
  NvmlMemory m{};
  if (api_->memory(device, &m) != kNvmlSuccess) return std::nullopt;
  return GpuMemoryUse{m.total, m.used};
}

LinkLevel Nvml::link(void* a, void* b, int* nvlinks) const {
  *nvlinks = 0;
  if (a == b) return LinkLevel::Same;
  int p2p = -1;
  if (api_->p2p_status(a, b, kP2pCapsNvlink, &p2p) == kNvmlSuccess && p2p == kP2pStatusOk) {
    // Links that end at b itself; through an NVSwitch they end at the switch, so count a's
    // active links instead.
    NvmlPciInfo peer{};
    const bool peer_known = api_->pci_info(b, &peer) == kNvmlSuccess;
    int direct = 0, active = 0;
    for (unsigned l = 0; l < kMaxNvlinks; ++l) {
      unsigned on = 0;
      if (api_->nvlink_state(a, l, &on) != kNvmlSuccess || !on) continue;
      ++active;
      NvmlPciInfo remote{};
      if (peer_known && api_->nvlink_remote_pci(a, l, &remote) == kNvmlSuccess &&
          same_pci(remote, peer))
        ++direct;
    }
    *nvlinks = direct > 0 ? direct : active;
    return LinkLevel::NvLink;
  }
  int level = -1;
  if (api_->ancestor(a, b, &level) != kNvmlSuccess) return LinkLevel::Unknown;
  return link_level_from_nvml(level);
}

}  // namespace qmpi::doctor
