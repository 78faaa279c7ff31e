// CUDA and cuBLAS failures as catalogue errors: "<call> failed: <what the runtime said>", with
// the code that tells the user what to do (no driver -> NoGpu, old driver -> DriverTooOld,
// anything else -> CudaError). The mapping is a pure function so it is tested without a GPU.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.h"

namespace qmpi::cuda {

struct CudaFailure {
  Err code = Err::CudaError;
  std::string message;
  std::string fix;  // empty: the catalogue's fix
};

// `driver_version` is cudaDriverGetVersion's answer (0 when no driver is loaded),
// `runtime_version` cudaRuntimeGetVersion's (e.g. 13000).
CudaFailure classify_cuda_error(cudaError_t rc, std::string_view call, int driver_version,
                                int runtime_version);

// "CUDA driver version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)"
std::string cuda_error_text(cudaError_t rc);
std::string cublas_status_text(cublasStatus_t status);
// 13000 -> "13.0"; 0 -> "none"
std::string cuda_version_text(int version);
// 1572864 -> "1.5 MiB", for messages about device memory.
std::string mib_text(uint64_t bytes);

[[noreturn]] void raise_cuda_error(cudaError_t rc, std::string_view call);
[[noreturn]] void raise_cublas_error(cublasStatus_t status, std::string_view call);

inline void check_cuda(cudaError_t rc, std::string_view call) {
  if (rc != cudaSuccess) [[unlikely]]
    raise_cuda_error(rc, call);
}
inline void check_cublas(cublasStatus_t status, std::string_view call) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    raise_cublas_error(status, call);
}

}  // namespace qmpi::cuda
