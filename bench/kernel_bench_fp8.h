// qmpi_kernel_bench --fp8: the projections of one qwen2.5-0.5b decode step as block-wise FP8
// (e4m3, 128x128 block scales), beside the same projections in bf16 (no lm_head, as for --int4).
#pragma once
#include <cstdint>
#include <vector>

#include "bench/kernel_bench_int4.h"

namespace qmpi::bench {

// With `bf16_act` (--bf16-activations, what `--dtype auto` sets) both sides take the options the
// CPU backend passes them under auto. Prints one JSON line per n and weight form; returns the
// exit code. The two forms alternate, repetition by repetition, so host load hits both alike.
int fp8_bench(int threads, int reps, const std::vector<int64_t>& ns, bool bf16_act,
              const Timer& timed);

}  // namespace qmpi::bench
