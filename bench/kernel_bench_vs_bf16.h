// What the quantized kernel benches (--int4, --fp8) share: the projections of one qwen2.5-0.5b
// decode step, and the timing of a quantized form against the same projections in bf16.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernel_bench_int4.h"

namespace qmpi::bench {

// [rows, cols] of q, k, v, o, gate, up, down for each of the 24 layers (no lm_head: on this
// shape the tied embedding would be most of a quantized model's bytes and hide the kernels).
std::vector<std::pair<int64_t, int64_t>> decode_step_shapes();
// The widest rows or columns among them (intermediate_size): x and out are sized by it.
constexpr int64_t kDecodeStepWidest = 4864;

struct FormsVsBf16 {
  std::string label;  // the quantized form's "weights" value
  size_t quant_bytes = 0, bf16_bytes = 0;
  std::function<void(int64_t n)> quant_pass, bf16_pass;  // every projection times n rows of x
  std::string extra_fields;  // JSON fields after "threads", each followed by ", "
};

// The two forms alternate, repetition by repetition (the first warms up), so host load hits
// both alike; prints one JSON line per n and form, the best of the repetitions.
void time_against_bf16(const FormsVsBf16& f, int threads, int reps, const std::vector<int64_t>& ns,
                       const Timer& timed);

}  // namespace qmpi::bench
