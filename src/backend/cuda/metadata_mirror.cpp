#include "backend/cuda/metadata_mirror.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_errors.h"
#include "core/errors.h"

namespace qmpi::cuda {

void MetadataMirror::stage(const uint8_t* src, size_t bytes) {
  // Grow geometrically: block tables grow a little every decode step.
  const size_t want = std::max(bytes, 2 * device_.capacity());
  if (bytes > device_.capacity()) device_.reserve(want);
  if (bytes > staging_.capacity()) staging_.reserve(want);
  std::memcpy(staging_.data(), src, bytes);
  last_.assign(src, src + bytes);
  valid_ = true;
}

const void* MetadataMirror::upload(const void* host, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return nullptr;
  const auto* src = static_cast<const uint8_t*>(host);
  if (mode_ != MirrorMode::Eager) return upload_recorded(src, bytes, stream);
  if (valid_ && bytes == last_.size() && std::memcmp(last_.data(), src, bytes) == 0)
    return device_.data();
  // The previous copy may still read the staging memory; it was enqueued long before, so this
  // wait is normally already over.
  copied_.synchronize();
  valid_ = false;
  stage(src, bytes);
  check_cuda(
      cudaMemcpyAsync(device_.data(), staging_.data(), bytes, cudaMemcpyHostToDevice, stream),
      "cudaMemcpyAsync (metadata upload)");
  copied_.record(stream);
  return device_.data();
}

const void* MetadataMirror::upload_recorded(const uint8_t* src, size_t bytes, cudaStream_t stream) {
  if (uploaded_in_pass_) {
    if (bytes == last_.size() && std::memcmp(last_.data(), src, bytes) == 0) return device_.data();
    raise(Err::Internal, "a recorded step uploads two different " + std::string(what_) +
                             " arrays; such a step cannot be a CUDA graph");
  }
  uploaded_in_pass_ = true;
  if (bytes > device_.capacity()) {
    // Growing would free the array a graph copies into: the step runs eagerly instead, which
    // grows it. The bytes are kept for the comparison above.
    last_.assign(src, src + bytes);
    valid_ = false;
    fits_ = false;
    return device_.data();
  }
  stage(src, bytes);
  if (mode_ == MirrorMode::Refresh) return device_.data();
  check_cuda(cudaMemcpyAsync(device_.data(), staging_.data(),
                             std::min(device_.capacity(), staging_.capacity()),
                             cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync (metadata upload, recorded)");
  return device_.data();
}

void MetadataMirror::begin(MirrorMode mode) {
  mode_ = mode;
  uploaded_in_pass_ = false;
  fits_ = true;
}

void MetadataMirror::end(bool launched, cudaStream_t stream) {
  const bool recorded = mode_ != MirrorMode::Eager && uploaded_in_pass_;
  mode_ = MirrorMode::Eager;
  if (!recorded) return;
  if (launched && fits_) {
    copied_.record(stream);  // after the graph: its copy is the last one out of staging_
  } else {
    valid_ = false;  // the staged bytes never reached the device
  }
}

}  // namespace qmpi::cuda
