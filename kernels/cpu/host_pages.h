// Large host buffers for the CPU backend: anonymous mappings aligned to 2 MiB, so that weights can
// sit in transparent huge pages. A decode step streams every weight byte once (988 MB for
// Qwen2.5-0.5B in bf16); with 4 KiB pages that is a TLB miss every 64 cache lines, and in a VM
// each miss is a two-level (guest and host) page walk. llama.cpp reads its weights through an
// mmap of the GGUF file, which the page cache of recent kernels maps with huge folios, so it
// does not pay them.
#pragma once
#include <cstddef>

namespace qmpi::cpu {

inline constexpr size_t kHugePage = size_t(2) << 20;

// `bytes` of zeroed, lazily faulted memory starting on a 2 MiB boundary, or null when the
// mapping fails. Free with unmap_host_pages(p, bytes).
void* map_host_pages(size_t bytes);
void unmap_host_pages(void* p, size_t bytes);

// Asks the kernel (MADV_HUGEPAGE) to back [p, p + bytes) with 2 MiB pages where the system allows
// it (transparent_hugepage "madvise" or "always"), before the pages are first touched: a hint,
// never an error. Only for memory that is read whole and often (weights): a KV cache whose pages
// fault in block by block would grow in 2 MiB steps.
void advise_huge_pages(void* p, size_t bytes);

}  // namespace qmpi::cpu
