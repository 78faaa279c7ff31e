// How CUDA and cuBLAS failures map onto the error catalogue (backend/cuda/cuda_errors.h).
#include "backend/cuda/cuda_errors.h"

#include <gtest/gtest.h>

namespace qmpi::cuda {
namespace {

TEST(CudaErrors, NoDriverIsNoGpuAndSaysSo) {
  const CudaFailure f =
      classify_cuda_error(cudaErrorInsufficientDriver, "cudaGetDeviceCount", 0, 13000);
  EXPECT_EQ(f.code, Err::NoGpu);
  EXPECT_EQ(f.message.rfind("cudaGetDeviceCount failed: ", 0), 0u) << f.message;
  EXPECT_NE(f.message.find("cudaErrorInsufficientDriver"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("no NVIDIA driver"), std::string::npos) << f.message;
}

TEST(CudaErrors, OldDriverIsDriverTooOldWithBothVersions) {
  const CudaFailure f =
      classify_cuda_error(cudaErrorInsufficientDriver, "cudaSetDevice(0)", 12040, 13000);
  EXPECT_EQ(f.code, Err::DriverTooOld);
  EXPECT_NE(f.message.find("CUDA 12.4"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("CUDA 13.0"), std::string::npos) << f.message;
}

TEST(CudaErrors, NoDeviceIsNoGpu) {
  EXPECT_EQ(classify_cuda_error(cudaErrorNoDevice, "cudaGetDeviceCount", 13000, 13000).code,
            Err::NoGpu);
}

TEST(CudaErrors, OutOfMemoryIsCudaErrorWithAFix) {
  const CudaFailure f =
      classify_cuda_error(cudaErrorMemoryAllocation, "cudaMalloc of 2.0 MiB", 13000, 13000);
  EXPECT_EQ(f.code, Err::CudaError);
  EXPECT_NE(f.message.find("cudaMalloc of 2.0 MiB failed: "), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("cudaErrorMemoryAllocation"), std::string::npos) << f.message;
  EXPECT_FALSE(f.fix.empty());
}

TEST(CudaErrors, MissingKernelImageSuggestsTheArchitectureOption) {
  const CudaFailure f =
      classify_cuda_error(cudaErrorNoKernelImageForDevice, "rmsnorm kernel", 13000, 13000);
  EXPECT_EQ(f.code, Err::CudaError);
  EXPECT_NE(f.fix.find("QMPI_CUDA_ARCHS"), std::string::npos) << f.fix;
}

TEST(CudaErrors, RaiseCarriesTheCodeAndCallName) {
  try {
    check_cuda(cudaErrorLaunchFailure, "attention kernel");
    FAIL() << "check_cuda did not raise";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::CudaError);
    EXPECT_EQ(e.message().rfind("attention kernel failed: ", 0), 0u) << e.message();
    EXPECT_NE(e.message().find("cudaErrorLaunchFailure"), std::string::npos) << e.message();
  }
  EXPECT_NO_THROW(check_cuda(cudaSuccess, "nothing"));
}

TEST(CudaErrors, CublasStatusIsNamed) {
  try {
    check_cublas(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate");
    FAIL() << "check_cublas did not raise";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::CudaError);
    EXPECT_NE(e.message().find("cublasCreate failed: "), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos) << e.message();
  }
}

TEST(CudaErrors, VersionAndSizeTexts) {
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(12040), "12.4");
  EXPECT_EQ(cuda_version_text(0), "none");
  EXPECT_EQ(mib_text(3 << 19), "1.5 MiB");
}

}  // namespace
}  // namespace qmpi::cuda
