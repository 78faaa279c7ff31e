// A small host array (token ids, positions, KV slots, block tables) mirrored into device scratch
// memory. Backend ops receive these as host pointers; every layer of a step passes the same
// ones, so an upload whose bytes equal the previous one is skipped. Uploads go through pinned
// memory, asynchronously on the backend's stream: the caller may reuse its array at once.
//
// For a step recorded as a CUDA graph (graph_book.h) a mirror works in two more modes. Capture:
// the step's first upload enqueues a copy of the whole staging array (its capacity, not just
// this step's bytes, so that a block table that grows still fits), which the graph repeats on
// every replay. Refresh, before a replay: uploads only write the staging memory that copy reads.
// In both, a later upload of the same step must carry the same bytes (it has no copy of its own).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/device_allocator.h"

namespace qmpi::cuda {

enum class MirrorMode { Eager, Capture, Refresh };

class MetadataMirror {
 public:
  MetadataMirror(DeviceAllocator& allocator, std::string_view what)
      : device_(allocator, MemPurpose::Scratch, what), what_(what) {}

  // Device copy of host[0 .. bytes), valid for work enqueued on `stream` after this call.
  const void* upload(const void* host, size_t bytes, cudaStream_t stream);
  const int32_t* upload_i32(const int32_t* host, int64_t count, cudaStream_t stream) {
    return static_cast<const int32_t*>(upload(host, size_t(count) * sizeof(int32_t), stream));
  }

  // Starts a recorded step's pass in `mode` (Capture or Refresh). The stream must be idle: the
  // staging memory is written without waiting for earlier copies.
  void begin(MirrorMode mode);
  // False when an upload of this pass was larger than the device array (the step must then run
  // eagerly, which grows it).
  bool fits() const { return fits_; }
  // Back to Eager. `launched`: the graph that copies the staging memory was launched on
  // `stream`; else the device holds none of this pass's bytes.
  void end(bool launched, cudaStream_t stream);

 private:
  const void* upload_recorded(const uint8_t* src, size_t bytes, cudaStream_t stream);
  void stage(const uint8_t* src, size_t bytes);

  DeviceArray device_;
  std::string_view what_;  // a string literal
  PinnedBuffer staging_;   // grown only with device_, whose free the graph book counts
  CudaEvent copied_;       // the last copy out of staging_
  std::vector<uint8_t> last_;
  bool valid_ = false;
  MirrorMode mode_ = MirrorMode::Eager;
  bool uploaded_in_pass_ = false;
  bool fits_ = true;
};

}  // namespace qmpi::cuda
