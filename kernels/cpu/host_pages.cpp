#include "kernels/cpu/host_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace qmpi::cpu {

void* map_host_pages(size_t bytes) {
  // Map one huge page more than asked and cut the mapping down to an aligned run of `bytes`.
  const size_t span = bytes + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const uintptr_t end = (aligned + bytes + page - 1) & ~uintptr_t(page - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  if (begin + span > end) munmap(reinterpret_cast<void*>(end), begin + span - end);
  return reinterpret_cast<void*>(aligned);
}

void advise_huge_pages(void* p, size_t bytes) {
  madvise(p, bytes, MADV_HUGEPAGE);
}

void unmap_host_pages(void* p, size_t bytes) {
  munmap(p, bytes);
}

}  // namespace qmpi::cpu
