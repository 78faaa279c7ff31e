#include "backend/cuda/device_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_errors.h"

namespace qmpi::cuda {

DeviceAllocator::~DeviceAllocator() {
  for (auto& [p, b] : blocks_) cudaFree(p);
}

void* DeviceAllocator::allocate(size_t bytes, MemPurpose purpose, std::string_view what) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear it: an out-of-memory is not sticky
    raise_cuda_error(rc, "cudaMalloc of " + mib_text(bytes) + " for " + std::string(what) +
                             " (this rank already holds " + mib_text(counters_.total_in_use()) +
                             ")");
  }
  blocks_.emplace(p, Block{bytes, purpose});
  const size_t i = size_t(purpose);
  counters_.in_use[i] += bytes;
  counters_.peak[i] = std::max(counters_.peak[i], counters_.in_use[i]);
  return p;
}

void DeviceAllocator::release(void* p) {
  if (!p) return;
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  counters_.in_use[size_t(it->second.purpose)] -= it->second.bytes;
  blocks_.erase(it);
  ++frees_;
  // cudaFree waits for work still using the memory; its error (if any) surfaces at the next
  // checked call, since a destructor path must not throw.
  cudaFree(p);
}

void* DeviceArray::reserve(size_t bytes) {
  if (bytes <= capacity_) return data_;
  free();
  data_ = allocator_->allocate(bytes, purpose_, what_);
  capacity_ = bytes;
  return data_;
}

void DeviceArray::free() {
  allocator_->release(data_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace qmpi::cuda
