#include "backend/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "backend/cuda/cuda_errors.h"

namespace qmpi::cuda {

CudaProbe probe_cuda() {
  CudaProbe p;
  cudaDriverGetVersion(&p.driver_version);
  cudaRuntimeGetVersion(&p.runtime_version);
  // Without a driver the runtime returns an error and leaves the count unwritten.
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc == cudaSuccess && count == 0) rc = cudaErrorNoDevice;
  if (rc != cudaSuccess) {
    cudaGetLastError();
    const CudaFailure f =
        classify_cuda_error(rc, "cudaGetDeviceCount", p.driver_version, p.runtime_version);
    p.error = f.code;
    p.message = f.message;
    if (rc == cudaErrorNoDevice) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      p.message += visible ? std::string("; CUDA_VISIBLE_DEVICES is \"") + visible + "\""
                           : std::string("; CUDA_VISIBLE_DEVICES is not set");
    }
    return p;
  }
  p.device_count = count;
  p.usable = true;
  return p;
}

int cuda_device_count() {
  const CudaProbe p = probe_cuda();
  if (!p.usable) raise(p.error, p.message);
  return p.device_count;
}

CudaDeviceInfo select_cuda_device(int index) {
  const int count = cuda_device_count();
  if (index < 0 || index >= count)
    raise(Err::VisibleDevices,
          "this rank was given CUDA device " + std::to_string(index) + " but only " +
              std::to_string(count) + " device(s) are visible",
          "Launch at most " + std::to_string(count) +
              " ranks per host, or let ranks share GPUs with --comm mpi and CUDA_VISIBLE_DEVICES "
              "set (e.g. CUDA_VISIBLE_DEVICES=0): ranks then take the listed GPUs round-robin.");
  check_cuda(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
  std::optional<CudaDeviceInfo> info = read_cuda_device(index);
  if (!info) {
    const cudaError_t rc = cudaGetLastError();
    check_cuda(rc != cudaSuccess ? rc : cudaErrorUnknown, "cudaGetDeviceProperties");
  }
  return *info;
}

std::optional<CudaDeviceInfo> read_cuda_device(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return std::nullopt;
  CudaDeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.total_bytes = prop.totalGlobalMem;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  char pci[32] = {};
  if (cudaDeviceGetPCIBusId(pci, sizeof pci, index) == cudaSuccess) info.pci = pci;
  return info;
}

DeviceMemory query_device_memory() {
  size_t free_b = 0, total_b = 0;
  check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return {free_b, total_b};
}

}  // namespace qmpi::cuda
