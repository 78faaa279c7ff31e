// Loads the --lora-modules adapters (PEFT folders) onto the projections of this rank's decoder
// weights. Every adapter is checked whole against the base config first, on every rank (the
// same files, the same answer, so all ranks fail alike and before serving); then each rank reads
// only the slices of its own layers that match its projections' TP split.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "model/config.h"
#include "model/decoder_weights.h"
#include "model/lora_config.h"
#include "model/shard_plan.h"

namespace qmpi {

// Fills Linear::lora of `w`'s projections, adapter i being opts.modules[i]. Raises the
// catalogue's LoRA errors (QM260-QM265) naming the adapter and tensor. Returns the bytes of
// adapter weights this rank holds.
// With bf16_activations (--dtype auto or bfloat16), the pairs of projections whose base weight
// is BF16 are held in BF16 (rounded to nearest even from F32 or F16 files): that matmul runs in
// bf16 already, and the adapter then streams half the bytes of PEFT's usual float32. Otherwise
// (--dtype float32, float32 or quantized bases) they keep the file's dtype, the exact path.
uint64_t load_lora_adapters(const ModelConfig& cfg, const ShardPlan& plan, const LoraOptions& opts,
                            Backend& be, DecoderWeights& w, bool bf16_activations = false);

}  // namespace qmpi
