// The process's device-write generation: a counter that everything writing device memory on
// the CUDA side bumps (every CudaBackend op that writes, and the CUDA comms, which write device
// buffers without going through a backend). A value read earlier and still current proves that
// nothing wrote device memory in between, which is what lets a backend reuse a copy it made of
// an activation (bf16_handoff.h) without reading the activation again.
#pragma once
#include <cstdint>

namespace qmpi::cuda {

// Bumps the generation before a write is enqueued; returns the new value.
uint64_t note_device_write();
uint64_t device_write_generation();

}  // namespace qmpi::cuda
