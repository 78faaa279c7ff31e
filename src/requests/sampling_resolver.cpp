#include "requests/sampling_resolver.h"

#include "core/errors.h"

namespace qmpi {
namespace {

void check(const SamplingParams& p) {
  if (p.temperature < 0) raise(Err::SamplingInvalid, "temperature must be >= 0");
  if (!(p.top_p > 0 && p.top_p <= 1)) raise(Err::SamplingInvalid, "top_p must be in (0, 1]");
  if (p.top_k == 0 || p.top_k < -1) raise(Err::SamplingInvalid, "top_k must be -1 or >= 1");
  if (p.min_p < 0 || p.min_p > 1) raise(Err::SamplingInvalid, "min_p must be in [0, 1]");
  if (p.repetition_penalty <= 0) raise(Err::SamplingInvalid, "repetition_penalty must be > 0");
}

// FNV-1a: stable across runs and machines (std::hash is neither).
uint64_t seed_of(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

SamplingParams resolve_sampling(const RequestSampling& s, const GenerationConfig& gen,
                                std::string_view seed_key) {
  SamplingParams p;
  p.temperature = s.temperature.value_or(gen.do_sample ? float(gen.temperature) : 0.0f);
  p.top_p = s.top_p.value_or(float(gen.top_p));
  // generation_config.json writes 0 for "off"; a request or an option must say -1.
  p.top_k = s.top_k.value_or(gen.top_k == 0 ? -1 : int32_t(gen.top_k));
  p.min_p = s.min_p.value_or(0.0f);
  p.repetition_penalty = s.repetition_penalty.value_or(float(gen.repetition_penalty));
  p.presence_penalty = s.presence_penalty.value_or(0.0f);
  p.frequency_penalty = s.frequency_penalty.value_or(0.0f);
  p.seed = s.seed.value_or(seed_of(seed_key));
  p.top_logprobs = s.logprobs ? s.top_logprobs : 0;
  check(p);
  return p;
}

}  // namespace qmpi
