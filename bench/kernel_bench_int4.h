// qmpi_kernel_bench --int4: the int4 projections of one qwen2.5-0.5b decode step beside the
// same projections in bf16 (no lm_head: on this shape the f16 tied embedding would be most of
// the int4 bytes and hide the kernels).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace qmpi::bench {

// Wall and CPU seconds of one call of its argument.
using Timer = std::function<std::pair<double, double>(const std::function<void()>&)>;

// `format` is awq (groups of 128 in input order) or gptq-act-order (the same groups reached
// through a shuffled x_index); bf16_act: both forms with bf16 activations. Prints one JSON line
// per n and weight type; returns the exit code.
int int4_bench(const std::string& format, int threads, int reps, const std::vector<int64_t>& ns,
               bool bf16_act, const Timer& timed);

}  // namespace qmpi::bench
