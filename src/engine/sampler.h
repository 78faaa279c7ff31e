// Turns one row of logits into a token: penalties, temperature, top-k / top-p / min-p, and a
// per-request random stream (seed, output index) so that the same request with the same seed
// samples the same tokens whatever else shares the batch.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace qmpi {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct Sampled {
  int32_t token = 0;
  float logprob = 0.0f;  // log-probability under the model's raw distribution
  // The params.top_logprobs most likely tokens of the raw distribution, most likely first.
  std::vector<TokenLogprob> top;
};

// `logits` is modified (penalties, masking). Only the first `valid_vocab` entries can be
// sampled (embedding rows past the tokenizer's vocabulary have no text). `history` holds the
// sequence's tokens so far (prompt and output), for the penalties. A non-empty `allowed`
// (StepSeq::allowed) masks every other id before anything else, so the reported logprobs are
// those of the masked distribution, as vLLM reports them under structured output.
Sampled sample_token(std::span<float> logits, int64_t valid_vocab, const SamplingParams& params,
                     uint32_t sample_index, std::span<const int32_t> history,
                     std::span<const uint64_t> allowed = {});

// The uniform draw in [0, 1) used for (seed, index); exposed for tests.
double sampling_uniform(uint64_t seed, uint32_t index);

// The seed of choice `choice` of a request with n > 1 choices: choice 0 keeps the request's
// seed (so n = 1 and the first of n agree), the others get independent streams.
uint64_t choice_seed(uint64_t seed, uint32_t choice);

}  // namespace qmpi
