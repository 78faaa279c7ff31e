#include "backend/cuda/copy_bandwidth.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_errors.h"

namespace qmpi {

double measure_copy_bandwidth(CudaBackend& backend, const void* src, void* dst, size_t bytes,
                              int repeats) {
  using cuda::check_cuda;
  const cudaStream_t s = backend.stream();
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  cuda::CudaEvent start(true), stop(true);
  std::vector<double> gbps;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    start.record(s);
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    stop.record(s);
    stop.synchronize();
    gbps.push_back(2.0 * double(bytes) / (double(stop.ms_since(start)) * 1e6));
  }
  std::nth_element(gbps.begin(), gbps.begin() + long(gbps.size() / 2), gbps.end());
  return gbps[gbps.size() / 2];
}

}  // namespace qmpi
