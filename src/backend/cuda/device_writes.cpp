#include "backend/cuda/device_writes.h"

#include <atomic>

namespace qmpi::cuda {
namespace {

// One per process, not per backend: a comm cannot tell which backend owns the memory it writes,
// and a write through another backend must invalidate this one's copies as well.
std::atomic<uint64_t> generation{0};

}  // namespace

uint64_t note_device_write() {
  return generation.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint64_t device_write_generation() {
  return generation.load(std::memory_order_relaxed);
}

}  // namespace qmpi::cuda
