// What rank 0 tells every rank to do in one step: which sequences advance, by which tokens,
// where their KV blocks are, and what to sample. Sent as bytes down the pipeline with the
// hidden states; the last stage's result comes back to rank 0 the same way.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"
#include "model/batch.h"

namespace qmpi {

struct StepSeq {
  int64_t id = 0;
  int32_t start_pos = 0;        // tokens already in the cache
  std::vector<int32_t> tokens;  // new tokens this step (prompt chunk or last sample)
  // The last `draft` of `tokens` are guesses (speculative decoding): the step samples after the
  // last real token and after each guess, keeps the guesses the samples agree with and returns
  // 1 to draft + 1 tokens. Only with sample and without all_logits.
  int32_t draft = 0;
  std::vector<int32_t> block_table;  // blocks covering start_pos + tokens.size()
  bool all_logits = false;           // return logits of every new token (qmpi logits)
  bool sample = true;                // sample one token after the last new token
  bool first_chunk = false;          // the sequence starts here (penalty history resets)
  SamplingParams sampling;
  uint32_t sample_index = 0;  // which output token this is (seeds the RNG stream)
  // With first_chunk and start_pos > 0 (a prefix-cache hit): the tokens already in the cache,
  // so the last stage's penalty history starts from the whole sequence.
  std::vector<int32_t> cached_prefix;
  // A constrained sequence (engine/token_constraint.h): the ids its next token may take, bit
  // (id % 64) of word (id / 64). Empty: any id.
  std::vector<uint64_t> allowed;
  int32_t adapter = -1;  // the LoRA adapter (--lora-modules index) its rows run with; -1: none
};

struct StepPlan {
  bool shutdown = false;
  bool poll_stop = false;   // no step: every rank joins stop_requested_anywhere (serving)
  int64_t valid_vocab = 0;  // ids that can be sampled (the tokenizer's size); 0 = every row
  std::vector<StepSeq> seqs;
  std::vector<int64_t> finished;  // sequences whose state the last stage can drop
};

struct StepResult {
  std::vector<int32_t> counts;  // tokens sampled per sampling sequence (1 + guesses accepted)
  std::vector<int32_t> tokens;  // the sampled tokens, counts[i] per sampling sequence, plan order
  std::vector<float> logprobs;  // log-probability of each sampled token
  std::vector<float> logits;    // [rows, vocab] for all_logits sequences, plan order
  // sampling.top_logprobs alternatives per sampled token (most likely first), plan order.
  std::vector<int32_t> top_tokens;
  std::vector<float> top_logprobs;
};

// The wire format's version, the first byte of every plan and result (the field lists are in
// step_plan.cpp). Decoding raises StepMessage for another version and for a truncated or
// garbled message.
constexpr uint8_t kStepWireVersion = 4;

std::vector<uint8_t> encode_step_plan(const StepPlan& plan);
StepPlan decode_step_plan(std::span<const uint8_t> bytes);
std::vector<uint8_t> encode_step_result(const StepResult& result);
StepResult decode_step_result(std::span<const uint8_t> bytes);

// Flattens a plan into the forward pass's batch (identical on every rank).
BatchInput make_batch(const StepPlan& plan, int block_size);

}  // namespace qmpi
