// qmpi_kernel_bench --attention: the CPU decode attention of one layer (one new token of one
// sequence against a context of N cached tokens) on the qwen2.5-0.5b shape (14 query heads over
// 2 KV heads of dim 64, blocks of 16 tokens), for each context and KV dtype asked.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/kernel_bench_int4.h"

namespace qmpi::bench {

// Each repetition times one call per layer over 24 layers' own caches, as a decode step walks
// them, so that no K/V byte is reused from cache between calls (24 x 16 MB at 32k in bf16); the
// exact float32 kernel and the bf16 decode path (what `--dtype auto` runs) alternate repetition
// by repetition. Prints one JSON line per context, KV dtype and path: ms per layer-call and the
// GB/s of K/V it read (best of the repetitions). `kv_dtypes` holds f32, bf16 or fp8. `huge`
// puts the caches in 2 MiB pages (the backend's KV cache sits in 4 KiB ones).
int attention_bench(const std::vector<int64_t>& contexts, const std::vector<std::string>& kv_dtypes,
                    int threads, int reps, bool huge, const Timer& timed);

}  // namespace qmpi::bench
