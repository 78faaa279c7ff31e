// Starting the CUDA backend where there may be no GPU: a catalogue error with a clear sentence,
// never a crash. On a GPU machine the same tests check that it starts.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"
#include "core/errors.h"

namespace qmpi {
namespace {

TEST(CudaProbe, ReportsTheRuntimeAndWhyNoDeviceIsUsable) {
  const cuda::CudaProbe p = cuda::probe_cuda();
  EXPECT_GE(p.runtime_version, 13000);  // the toolkit qmpi is built with
  if (p.usable) {
    EXPECT_GT(p.device_count, 0);
    EXPECT_GT(p.driver_version, 0);
  } else {
    EXPECT_EQ(p.device_count, 0);
    EXPECT_TRUE(p.error == Err::NoGpu || p.error == Err::DriverTooOld) << int(p.error);
    EXPECT_EQ(p.message.rfind("cudaGetDeviceCount failed: ", 0), 0u) << p.message;
  }
}

TEST(CudaBackendStart, RaisesNoGpuOrDriverTooOldWithoutADevice) {
  const cuda::CudaProbe p = cuda::probe_cuda();
  if (p.usable) {
    std::unique_ptr<Backend> be = make_cuda_backend();
    EXPECT_EQ(be->name(), "cuda");
    EXPECT_FALSE(be->host_memory());
    return;
  }
  try {
    make_cuda_backend();
    FAIL() << "the CUDA backend started without a usable device";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == Err::NoGpu || e.code() == Err::DriverTooOld) << e.render();
    EXPECT_EQ(e.message(), p.message);
    // The rendered error names the catalogue entry and a fix the user can act on.
    const std::string text = e.render();
    EXPECT_NE(text.find(error_id(e.code())), std::string::npos) << text;
    EXPECT_NE(text.find("fix"), std::string::npos) << text;
  }
}

TEST(CudaBackendStart, ADeviceIndexBeyondTheVisibleOnesIsReported) {
  const cuda::CudaProbe p = cuda::probe_cuda();
  CudaBackendOptions o;
  o.device = p.device_count;  // one past the last visible device (0 without a GPU)
  try {
    make_cuda_backend(o);
    FAIL() << "device " << o.device << " of " << p.device_count << " accepted";
  } catch (const Error& e) {
    if (p.usable) {
      EXPECT_EQ(e.code(), Err::VisibleDevices) << e.render();
      EXPECT_NE(e.message().find("only " + std::to_string(p.device_count)), std::string::npos)
          << e.message();
    } else {
      EXPECT_EQ(e.code(), p.error) << e.render();
    }
  }
}

}  // namespace
}  // namespace qmpi
