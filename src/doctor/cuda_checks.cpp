#include "doctor/cuda_checks.h"

#include "core/errors.h"

#ifndef QMPI_WITH_CUDA

namespace qmpi::doctor {

bool cuda_built() {
  return false;
}
bool cuda_usable() {
  return false;
}

std::vector<Finding> check_cuda_host(const GpuHostInput& in) {
  if (in.required)
    return {fail("cuda", Err::BackendUnavailable,
                 "--backend cuda: this qmpi was built without the CUDA backend (no nvcc at build "
                 "time)")};
  return {ok("cuda",
             "CUDA backend: not built into this qmpi (no nvcc at build time); GPU checks "
             "skipped, runs use the CPU backend")};
}

std::vector<Finding> check_cuda_rank(int, int, bool, const std::string&) {
  return {};
}

void use_cuda_for_selftest(SelfTestSetup&, int, int, bool) {
  raise(Err::BackendUnavailable, "this qmpi was built without the CUDA backend");
}

}  // namespace qmpi::doctor

#else

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cublas_library.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_errors.h"
#include "core/byte_size.h"
#include "doctor/host_checks.h"
#include "doctor/nvml.h"
#include "doctor/visible_devices.h"
#include "parallel/nccl/comm_nccl.h"
#include "parallel/nccl/comm_staged_mpi.h"
#include "parallel/topology.h"

namespace qmpi::doctor {
namespace {

constexpr const char* kSection = "cuda";

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

struct Device : cuda::CudaDeviceInfo {
  void* nvml = nullptr;
  std::string label() const { return "cuda:" + std::to_string(index); }
};

// cuBLAS is opened on the backend's first GEMM, not linked (cublas_library.h), so a host without
// it would pass every other check and fail only then. On a host with no GPU it is a note.
Finding cublas_finding(bool needed) {
  try {
    cuda::cublas();
    return ok(kSection, "cuBLAS: " + cuda::cublas_soname() + " opens");
  } catch (const Error& e) {
    if (needed) return fail(kSection, e);
    return ok(kSection, "cuBLAS: " + cuda::cublas_soname() +
                            " is not on this host's library path (only --backend cuda needs it)");
  }
}

// A column of the link matrix.
std::string cell(const std::string& text) {
  return text.size() >= 8 ? text + " " : text + std::string(8 - text.size(), ' ');
}

// Device memory for the self-test, freed when the test ends.
class DeviceMemory : public TestMemory {
 public:
  ~DeviceMemory() override {
    for (void* p : blocks_) cudaFree(p);
  }
  std::string name() const override { return "cuda"; }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    cuda::check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (doctor self-test)");
    blocks_.push_back(p);
    return p;
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    cuda::check_cuda(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  void download(void* host, const void* src, size_t bytes) override {
    cuda::check_cuda(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  void synchronize() override {
    cuda::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  std::vector<void*> blocks_;
};

// One line per device; the devices, with their NVML handles where NVML knows them.
std::vector<Device> list_devices(int device_count, Nvml* nvml, std::vector<Finding>& out) {
  std::vector<Device> devices;
  for (int i = 0; i < device_count; ++i) {
    const std::optional<cuda::CudaDeviceInfo> info = cuda::read_cuda_device(i);
    if (!info) continue;
    Device d;
    static_cast<cuda::CudaDeviceInfo&>(d) = *info;
    if (nvml && !d.pci.empty()) d.nvml = nvml->device_by_pci(d.pci);
    devices.push_back(d);
    out.push_back(ok(kSection, d.label() + ": " + d.name + ", " + format_bytes(d.total_bytes) +
                                   ", compute " + std::to_string(d.major) + "." +
                                   std::to_string(d.minor) + ", PCI " + d.pci));
  }
  return devices;
}

// CUDA_VISIBLE_DEVICES, and the host's ranks against its GPUs (one rank per GPU).
void visibility_findings(const GpuHostInput& in, int count, const Nvml* nvml,
                         std::vector<Finding>& out) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto problems = check_visible_devices(visible, count, nvml ? nvml->device_count() : -1);
  for (const auto& p : problems)
    out.push_back(fail(kSection, Err::VisibleDevices, p.message, p.fix));
  if (problems.empty())
    out.push_back(ok(kSection, visible ? std::string("CUDA_VISIBLE_DEVICES=\"") + visible +
                                             "\": " + std::to_string(count) + " device(s) visible"
                                       : "CUDA_VISIBLE_DEVICES is unset: all " +
                                             std::to_string(count) + " device(s) visible"));

  if (in.local_size > count && !in.share_devices)
    out.push_back(fail(kSection, Err::VisibleDevices,
                       std::to_string(in.local_size) + " ranks on this host but " +
                           std::to_string(count) + " GPU(s) visible: qmpi runs one rank per GPU",
                       "Launch at most " + std::to_string(count) +
                           " ranks per host, or let ranks share GPUs with --comm mpi."));
  else
    out.push_back(ok(kSection, std::to_string(in.local_size) + " rank(s) on this host, " +
                                   std::to_string(count) + " GPU(s) visible" +
                                   (in.local_size > count ? " (shared: --comm mpi)" : "")));
}

// Memory other processes already hold on each device.
void memory_in_use_findings(const std::vector<Device>& devices, Nvml* nvml,
                            std::vector<Finding>& out) {
  std::string in_use;
  for (const Device& d : devices) {
    uint64_t used = 0;
    if (d.nvml) {
      if (auto m = nvml->memory(d.nvml)) used = m->used;
    } else {
      // Without NVML: cudaMemGetInfo, which creates a context here (counted in `used`).
      size_t free_b = 0, total_b = 0;
      if (cudaSetDevice(d.index) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
        used = total_b - free_b;
    }
    if (used > kGpuMemoryInUseWarn)
      out.push_back(warn(kSection, Err::GpuMemoryInUse,
                         d.label() + " (" + d.name + "): " + format_bytes(used) + " of " +
                             format_bytes(d.total_bytes) +
                             " is already in use by other processes"));
    else
      in_use += (in_use.empty() ? "" : ", ") + d.label() + " " + format_bytes(used);
  }
  if (!in_use.empty()) out.push_back(ok(kSection, "memory already in use: " + in_use));
}

// The device pairs of TP peers on this host (the device of local rank r as the engine picks it).
std::vector<std::pair<int, int> > tp_peer_devices(const GpuHostInput& in, int count) {
  auto device_of = [&](int local_rank) { return count > 0 ? local_rank % count : 0; };
  std::vector<std::pair<int, int> > peers;
  for (const auto& group : in.tp_groups)
    for (size_t a = 0; a < group.size(); ++a)
      for (size_t b = a + 1; b < group.size(); ++b) {
        const int da = device_of(group[a]), db = device_of(group[b]);
        if (da != db &&
            std::find(peers.begin(), peers.end(), std::make_pair(da, db)) == peers.end())
          peers.emplace_back(da, db);
      }
  return peers;
}

// The NVML link matrix, and a warning for TP peers on a slow link.
void link_findings(const std::vector<Device>& devices,
                   const std::vector<std::pair<int, int> >& peers, Nvml* nvml,
                   const std::string& why_no_nvml, std::vector<Finding>& out) {
  if (!nvml) {
    out.push_back(ok(kSection, "GPU link matrix: NVML not available (" + why_no_nvml + ")"));
    return;
  }
  if (devices.size() < 2) {
    out.push_back(ok(kSection, "GPU link matrix: one GPU, no links to check"));
    return;
  }
  std::string matrix = "GPU link matrix (NVML):\n" + cell("");
  for (const Device& d : devices) matrix += cell(d.label());
  for (const Device& a : devices) {
    matrix += "\n" + cell(a.label());
    for (const Device& b : devices) {
      int links = 0;
      const LinkLevel l =
          a.nvml && b.nvml ? nvml->link(a.nvml, b.nvml, &links) : LinkLevel::Unknown;
      matrix += cell(link_name(l, links));
    }
  }
  out.push_back(ok(kSection, matrix));
  for (const auto& [da, db] : peers) {
    int links = 0;
    const Device &a = devices[size_t(da)], &b = devices[size_t(db)];
    if (!a.nvml || !b.nvml) continue;
    const LinkLevel l = nvml->link(a.nvml, b.nvml, &links);
    if (link_is_slow_for_tp(l))
      out.push_back(warn(kSection, Err::TpSlowLink,
                         "TP peers on " + a.label() + " and " + b.label() + " are joined by " +
                             link_name(l, links) + " (across CPU sockets)"));
  }
}

void peer_access_findings(const std::vector<std::pair<int, int> >& peers,
                          std::vector<Finding>& out) {
  for (const auto& [da, db] : peers) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, da, db) == cudaSuccess && !can)
      out.push_back(warn(kSection, Err::TpSlowLink,
                         "TP peers on cuda:" + std::to_string(da) +
                             " and cuda:" + std::to_string(db) +
                             " have no peer access: their all-reduces go "
                             "through host memory"));
  }
  if (!peers.empty())
    out.push_back(ok(kSection, "peer access checked for " + std::to_string(peers.size()) +
                                   " pair(s) of TP peers' GPUs"));
}

// The layout's memory plan against the smallest GPU of this host.
void device_memory_findings(const GpuHostInput& in, const std::vector<Device>& devices,
                            std::vector<Finding>& out) {
  if (!in.cfg || devices.empty()) return;
  PlanInputs plan = in.plan;
  plan.backend = BackendKind::Cuda;
  plan.gpu_mem = UINT64_MAX;
  for (const Device& d : devices) plan.gpu_mem = std::min(plan.gpu_mem, d.total_bytes);
  auto mem =
      memory_findings(kSection, *in.cfg, in.layout, plan,
                      "--gpu-memory-utilization " + std::to_string(plan.gpu_util).substr(0, 4) +
                          " of " + format_bytes(plan.gpu_mem));
  out.insert(out.end(), mem.begin(), mem.end());
}

}  // namespace

bool cuda_built() {
  return true;
}
bool cuda_usable() {
  return cuda::probe_cuda().usable;
}

std::vector<Finding> check_cuda_host(const GpuHostInput& in) {
  std::vector<Finding> out;
  const cuda::CudaProbe probe = cuda::probe_cuda();
  const std::string built = "CUDA backend built (runtime " +
                            cuda::cuda_version_text(probe.runtime_version) + ", NCCL " +
                            nccl_version() + ")";
  if (!probe.usable) {
    if (probe.error == Err::DriverTooOld || in.required)
      out.push_back(fail(kSection, probe.error, built + " but " + probe.message));
    else
      out.push_back(ok(kSection, built +
                                     ", but no NVIDIA driver or device is present on this "
                                     "host (" +
                                     probe.message + "); GPU checks skipped"));
    out.push_back(cublas_finding(in.required));
    return out;
  }
  std::string why_no_nvml;
  const std::unique_ptr<Nvml> nvml = Nvml::open(&why_no_nvml);
  out.push_back(ok(kSection, built + "; driver supports CUDA " +
                                 cuda::cuda_version_text(probe.driver_version) +
                                 (nvml ? " (driver " + nvml->driver_version() + ")" : "")));
  out.push_back(cublas_finding(true));
  const std::vector<Device> devices = list_devices(probe.device_count, nvml.get(), out);
  const int count = int(devices.size());
  visibility_findings(in, count, nvml.get(), out);
  memory_in_use_findings(devices, nvml.get(), out);
  const std::vector<std::pair<int, int> > peers = tp_peer_devices(in, count);
  link_findings(devices, peers, nvml.get(), why_no_nvml, out);
  peer_access_findings(peers, out);
  device_memory_findings(in, devices, out);
  return out;
}

std::vector<Finding> check_cuda_rank(int local_rank, int local_size, bool share_devices,
                                     const std::string& host) {
  if (!cuda::probe_cuda().usable) return {};
  try {
    choose_device(true, local_rank, local_size, std::getenv("CUDA_VISIBLE_DEVICES"), share_devices,
                  host);
  } catch (const Error& e) {
    return {fail(kSection, e)};
  }
  return {};
}

void use_cuda_for_selftest(SelfTestSetup& setup, int local_rank, int local_size,
                           bool share_devices) {
  const DeviceChoice d = choose_device(true, local_rank, local_size,
                                       std::getenv("CUDA_VISIBLE_DEVICES"), share_devices, "");
  cuda::select_cuda_device(d.index);
  if (share_devices) {
    const double timeout = setup.timeout_s;
    setup.tp_comm = [timeout](MPI_Comm group, const std::string& label) {
      return make_staged_mpi_comm(group, label, timeout);
    };
  } else {
    setup.tp_comm = make_nccl_comm;
  }
  setup.tp_memory = std::make_unique<DeviceMemory>();
}

}  // namespace qmpi::doctor

#endif
