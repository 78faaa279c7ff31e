// qmpi_kernel_bench --ggml TYPE: the projections of one qwen2.5-0.5b decode step as GGUF blocks
// of TYPE (Q4_K, Q8_0, ...), beside the same projections in bf16 (no lm_head, as for --int4).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/kernel_bench_int4.h"

namespace qmpi::bench {

// A matrix whose rows are not whole blocks of TYPE takes llama-quantize's fallback type (Q4_K ->
// Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0), as a real file of that type has it.
// With `reduced` (--bf16-activations, what `--dtype auto` sets) the GGUF side runs the int8-
// activation GEMV where it has one and the bf16 side bf16 dot products. Prints one JSON line per
// n and weight form; returns the exit code.
int ggml_bench(const std::string& type, int threads, int reps, const std::vector<int64_t>& ns,
               bool reduced, const Timer& timed);

}  // namespace qmpi::bench
