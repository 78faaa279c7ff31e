// The CUDA backend's one device allocator: plain cudaMalloc (no managed memory), with the bytes
// in use and their peak counted per purpose, so the memory budget can use measured numbers.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>

namespace qmpi::cuda {

enum class MemPurpose : uint8_t {
  Weights,  // Backend::make_weight
  Buffers,  // Backend::alloc: activations and the KV cache
  Scratch,  // the backend's own: metadata arrays, GEMM inputs, cuBLAS workspace
};
inline constexpr size_t kMemPurposes = 3;

struct MemoryCounters {
  std::array<uint64_t, kMemPurposes> in_use{};
  std::array<uint64_t, kMemPurposes> peak{};

  uint64_t used(MemPurpose p) const { return in_use[size_t(p)]; }
  uint64_t peak_of(MemPurpose p) const { return peak[size_t(p)]; }
  uint64_t total_in_use() const { return in_use[0] + in_use[1] + in_use[2]; }
};

class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // Raises Err::CudaError naming `what`, the size and what this rank already holds.
  void* allocate(size_t bytes, MemPurpose purpose, std::string_view what);
  void release(void* p);
  const MemoryCounters& counters() const { return counters_; }
  // Blocks freed so far: a recorded CUDA graph may point at any block freed after it.
  uint64_t frees() const { return frees_; }
  // Starts a new peak measurement (e.g. before a profiling forward pass).
  void reset_peaks() { counters_.peak = counters_.in_use; }

 private:
  struct Block {
    size_t bytes;
    MemPurpose purpose;
  };
  std::unordered_map<void*, Block> blocks_;
  MemoryCounters counters_;
  uint64_t frees_ = 0;
};

// A device array owned through the allocator, grown on demand (contents are not kept).
class DeviceArray {
 public:
  DeviceArray(DeviceAllocator& allocator, MemPurpose purpose, std::string_view what)
      : allocator_(&allocator), purpose_(purpose), what_(what) {}
  ~DeviceArray() { free(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void* reserve(size_t bytes);
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void free();
  DeviceAllocator* allocator_;
  MemPurpose purpose_;
  std::string_view what_;  // a string literal
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace qmpi::cuda
