// A small host array (token ids, positions, KV slots, block tables) mirrored into device scratch
// memory. Backend ops receive these as host pointers; every layer of a step passes the same
// ones, so an upload whose bytes equal the previous one is skipped. Uploads go through pinned
// memory, asynchronously on the backend's stream: the caller may reuse its array at once.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/device_allocator.h"

namespace qmpi::cuda {

class MetadataMirror {
 public:
  MetadataMirror(DeviceAllocator& allocator, std::string_view what)
      : device_(allocator, MemPurpose::Scratch, what) {}

  // Device copy of host[0 .. bytes), valid for work enqueued on `stream` after this call.
  const void* upload(const void* host, size_t bytes, cudaStream_t stream);
  const int32_t* upload_i32(const int32_t* host, int64_t count, cudaStream_t stream) {
    return static_cast<const int32_t*>(upload(host, size_t(count) * sizeof(int32_t), stream));
  }

 private:
  DeviceArray device_;
  PinnedBuffer staging_;
  CudaEvent copied_;  // the last copy out of staging_
  std::vector<uint8_t> last_;
  bool valid_ = false;
};

}  // namespace qmpi::cuda
