// The one sampling resolver: request fields (or `qmpi run`'s options) over generation_config.json.
#include <gtest/gtest.h>

#include "../expect_error.h"
#include "requests/sampling_resolver.h"

namespace qmpi {
namespace {

GenerationConfig qwen_like() {
  GenerationConfig gen;
  gen.do_sample = true;
  gen.temperature = 0.7;
  gen.top_p = 0.8;
  gen.top_k = 20;
  gen.repetition_penalty = 1.05;
  return gen;
}

// Hugging Face's generation_config.json writes top_k 0 for "no top-k". `qmpi batch` took it as
// off while `qmpi run` refused it; with one resolver both take it as off.
TEST(SamplingResolver, TopKZeroFromTheGenerationConfigMeansOff) {
  GenerationConfig gen = qwen_like();
  gen.top_k = 0;
  const SamplingParams p = resolve_sampling(RequestSampling{}, gen, "a");
  EXPECT_EQ(p.top_k, -1);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  RequestSampling given;
  given.top_k = 5;  // a value the request gives still wins
  EXPECT_EQ(resolve_sampling(given, gen, "a").top_k, 5);
}

TEST(SamplingResolver, GivenFieldsWinAndDefaultsComeFromTheModel) {
  const GenerationConfig gen = qwen_like();
  RequestSampling f;
  const SamplingParams d = resolve_sampling(f, gen, "a");
  EXPECT_EQ(d.top_k, 20);
  EXPECT_FLOAT_EQ(d.top_p, 0.8f);
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.05f);
  EXPECT_FLOAT_EQ(d.min_p, 0.0f);
  f.temperature = 0.0f;
  f.top_p = 0.5f;
  f.repetition_penalty = 1.0f;
  f.seed = 9;
  const SamplingParams p = resolve_sampling(f, gen, "a");
  EXPECT_TRUE(p.greedy());
  EXPECT_FLOAT_EQ(p.top_p, 0.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.seed, 9u);
  // No seed: one from the key, stable, different for another key.
  EXPECT_EQ(resolve_sampling({}, gen, "a").seed, resolve_sampling({}, gen, "a").seed);
  EXPECT_NE(resolve_sampling({}, gen, "a").seed, resolve_sampling({}, gen, "b").seed);
}

TEST(SamplingResolver, OutOfRangeValuesAreRefused) {
  const GenerationConfig gen = qwen_like();
  const auto with = [](auto set) {
    RequestSampling f;
    set(f);
    return f;
  };
  // An explicit 0 is not "off" (that is -1), as a request's "top_k": 0 is refused.
  testing::expect_error([&] { resolve_sampling(with([](auto& f) { f.top_k = 0; }), gen, "a"); },
                        Err::SamplingInvalid, {"top_k"});
  testing::expect_error([&] { resolve_sampling(with([](auto& f) { f.top_k = -3; }), gen, "a"); },
                        Err::SamplingInvalid, {"top_k"});
  testing::expect_error(
      [&] { resolve_sampling(with([](auto& f) { f.temperature = -1; }), gen, "a"); },
      Err::SamplingInvalid, {"temperature"});
  testing::expect_error([&] { resolve_sampling(with([](auto& f) { f.top_p = 0; }), gen, "a"); },
                        Err::SamplingInvalid, {"top_p"});
  testing::expect_error([&] { resolve_sampling(with([](auto& f) { f.min_p = 2; }), gen, "a"); },
                        Err::SamplingInvalid, {"min_p"});
  GenerationConfig broken = gen;
  broken.repetition_penalty = 0;
  testing::expect_error([&] { resolve_sampling({}, broken, "a"); }, Err::SamplingInvalid,
                        {"repetition_penalty"});
}

}  // namespace
}  // namespace qmpi
