#include "backend/cuda/metadata_mirror.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_errors.h"

namespace qmpi::cuda {

const void* MetadataMirror::upload(const void* host, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return nullptr;
  const auto* src = static_cast<const uint8_t*>(host);
  if (valid_ && bytes == last_.size() && std::memcmp(last_.data(), src, bytes) == 0)
    return device_.data();
  // The previous copy may still read the staging memory; it was enqueued long before, so this
  // wait is normally already over.
  copied_.synchronize();
  valid_ = false;
  // Grow geometrically: block tables grow a little every decode step.
  const size_t want = std::max(bytes, 2 * device_.capacity());
  if (bytes > device_.capacity()) device_.reserve(want);
  if (bytes > staging_.capacity()) staging_.reserve(want);
  std::memcpy(staging_.data(), src, bytes);
  check_cuda(
      cudaMemcpyAsync(device_.data(), staging_.data(), bytes, cudaMemcpyHostToDevice, stream),
      "cudaMemcpyAsync (metadata upload)");
  copied_.record(stream);
  last_.assign(src, src + bytes);
  valid_ = true;
  return device_.data();
}

}  // namespace qmpi::cuda
