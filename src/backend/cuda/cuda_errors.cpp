#include "backend/cuda/cuda_errors.h"

#include <cstdio>

#include "backend/cuda/cublas_library.h"

namespace qmpi::cuda {

std::string cuda_version_text(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string mib_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

std::string cuda_error_text(cudaError_t rc) {
  return std::string(cudaGetErrorString(rc)) + " (" + cudaGetErrorName(rc) + ")";
}

std::string cublas_status_text(cublasStatus_t status) {
  return std::string(cublas().status_string(status)) + " (" + cublas().status_name(status) + ")";
}

CudaFailure classify_cuda_error(cudaError_t rc, std::string_view call, int driver_version,
                                int runtime_version) {
  CudaFailure f;
  f.message = std::string(call) + " failed: " + cuda_error_text(rc);
  switch (rc) {
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
      f.code = Err::NoGpu;
      break;
    case cudaErrorInsufficientDriver:
      // The runtime says "insufficient" both when the driver is old and when there is none.
      if (driver_version <= 0) {
        f.code = Err::NoGpu;
        f.message += "; no NVIDIA driver is loaded on this machine";
      } else {
        f.code = Err::DriverTooOld;
        f.message += "; the driver supports CUDA " + cuda_version_text(driver_version) +
                     " but qmpi was built with CUDA " + cuda_version_text(runtime_version);
      }
      break;
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      f.code = Err::DriverTooOld;
      break;
    case cudaErrorMemoryAllocation:
      f.fix =
          "Lower --gpu-memory-utilization or --kv-blocks, or spread the model over more GPUs "
          "(larger --tp or --pp).";
      break;
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      f.fix =
          "Rebuild qmpi for this GPU's architecture, e.g. cmake -DQMPI_CUDA_ARCHS=\"80;86;89;90\".";
      break;
    default:
      break;
  }
  return f;
}

void raise_cuda_error(cudaError_t rc, std::string_view call) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  CudaFailure f = classify_cuda_error(rc, call, driver, runtime);
  raise(f.code, std::move(f.message), std::move(f.fix));
}

void raise_cublas_error(cublasStatus_t status, std::string_view call) {
  std::string fix;
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    fix = "Lower --gpu-memory-utilization or --kv-blocks so cuBLAS has room for its workspace.";
  raise(Err::CudaError, std::string(call) + " failed: " + cublas_status_text(status),
        std::move(fix));
}

}  // namespace qmpi::cuda
