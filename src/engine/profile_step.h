// One forward pass of this rank's stage at the largest step the engine will run, before the KV
// cache exists, so that a device backend can measure its workspace (activations, GEMM and
// metadata scratch) and give the rest of its budget to KV blocks.
//
// The step is one sequence of shape.tokens tokens whose logits are taken for the last
// shape.logit_rows rows. Its keys all go to one throwaway KV block (a token's slot is its
// position modulo the block size, and every block-table entry is block 0): attention does the
// work of the real step without a cache of its size. Stages run on their own (a later stage
// starts from zeros instead of receiving hidden states); the TP ranks of a stage run together,
// as their collectives need.
#pragma once
#include "backend/backend.h"
#include "engine/kv_sizing.h"
#include "model/batch.h"
#include "model/decoder.h"
#include "model/kv_cache.h"

namespace qmpi {

// The step's batch: tokens 0, positions 0..tokens-1, slots and block table in block 0.
BatchInput profile_batch(const ProfileShape& shape, int block_size);

// Runs the step (embed on the first stage, the stage's layers, logits on the last stage) with
// a one-block KV cache of `kv`'s shape and a hidden-state buffer as the Executor holds, both
// freed on return; the model keeps its step-sized scratch. Waits for the backend. Returns the
// bytes of the throwaway KV cache.
uint64_t run_profile_step(DecoderModel& model, Backend& backend, KvCacheShape kv,
                          const ProfileShape& shape);

}  // namespace qmpi
