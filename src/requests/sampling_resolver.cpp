#include "requests/sampling_resolver.h"

#include <string>
#include <variant>

#include "core/decimal_text.h"
#include "core/errors.h"

namespace qmpi {
namespace {

// The table's ranges, the same a request's fields were checked against when parsed: this
// catches command-line values and generation_config.json.
void check(const SamplingParams& p) {
  for (const SamplingField& row : kSamplingFields)
    if (!row.range.allows(sampling_value(p, row)))
      raise(Err::SamplingInvalid, std::string(row.name) + " must be " + row.range.text() +
                                      ", got " + decimal_text(sampling_value(p, row)));
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
  SamplingParams p;  // the model's defaults, then the given fields over them
  p.temperature = gen.do_sample ? float(gen.temperature) : 0.0f;
  p.top_p = float(gen.top_p);
  // generation_config.json writes 0 for "off"; a request or an option must say -1.
  p.top_k = gen.top_k == 0 ? -1 : int32_t(gen.top_k);
  p.repetition_penalty = float(gen.repetition_penalty);
  p.seed = seed_of(seed_key);
  for (size_t i = 0; i < kSamplingFieldCount; ++i)
    if (s.given.test(i))
      std::visit([&](auto member) { p.*member = s.values.*member; }, kSamplingFields[i].member);
  p.top_logprobs = s.logprobs ? s.top_logprobs : 0;
  check(p);
  return p;
}

}  // namespace qmpi
