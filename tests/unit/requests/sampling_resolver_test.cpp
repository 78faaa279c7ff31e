// The one sampling resolver: request fields (or `qmpi run`'s options) over generation_config.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "../expect_error.h"

#include "requests/request_parser.h"
#include "requests/sampling_resolver.h"

namespace qmpi {
namespace {

using json = nlohmann::ordered_json;

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
  given.set(&SamplingParams::top_k, 5);  // a value the request gives still wins
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
  f.set(&SamplingParams::temperature, 0.0f);
  f.set(&SamplingParams::top_p, 0.5f);
  f.set(&SamplingParams::repetition_penalty, 1.0f);
  f.set(&SamplingParams::seed, uint64_t(9));
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
  testing::expect_error(
      [&] {
        resolve_sampling(with([](auto& f) { f.set(&SamplingParams::top_k, int32_t(0)); }), gen,
                         "a");
      },
      Err::SamplingInvalid, {"top_k"});
  testing::expect_error(
      [&] {
        resolve_sampling(with([](auto& f) { f.set(&SamplingParams::top_k, int32_t(-3)); }), gen,
                         "a");
      },
      Err::SamplingInvalid, {"top_k"});
  testing::expect_error(
      [&] {
        resolve_sampling(with([](auto& f) { f.set(&SamplingParams::temperature, float(-1)); }), gen,
                         "a");
      },
      Err::SamplingInvalid, {"temperature"});
  testing::expect_error(
      [&] {
        resolve_sampling(with([](auto& f) { f.set(&SamplingParams::top_p, float(0)); }), gen, "a");
      },
      Err::SamplingInvalid, {"top_p"});
  testing::expect_error(
      [&] {
        resolve_sampling(with([](auto& f) { f.set(&SamplingParams::min_p, float(2)); }), gen, "a");
      },
      Err::SamplingInvalid, {"min_p"});
  GenerationConfig broken = gen;
  broken.repetition_penalty = 0;
  testing::expect_error([&] { resolve_sampling({}, broken, "a"); }, Err::SamplingInvalid,
                        {"repetition_penalty"});
}

// The parser and the resolver check one table's ranges: a value a request may send is one the
// command line may give, and the other way round (the parser took temperature up to 100 and
// repetition_penalty up to 10 while `qmpi run --temperature 200` was sampled).
TEST(SamplingResolver, RequestsAndOptionsShareOneRangePerField) {
  const GenerationConfig gen = qwen_like();
  for (const SamplingField& row : kSamplingFields) {
    for (const double v :
         {-1e9, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 10.0, 11.0, 100.0, 101.0, 1e9}) {
      const bool integer = !std::holds_alternative<float SamplingParams::*>(row.member);
      if (std::holds_alternative<uint64_t SamplingParams::*>(row.member) && v < 0) continue;
      const std::string value = integer ? std::to_string(int64_t(v)) : std::to_string(v);
      if (integer && v != double(int64_t(v))) continue;
      Request parsed;
      bool parser_took = true;
      try {
        read_request_body(
            json::parse(R"({"prompt": "x", ")" + std::string(row.name) + "\": " + value + "}"),
            parsed, "test", false);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Err::SamplingInvalid) << row.name << " " << value;
        parser_took = false;
      }
      RequestSampling given;
      std::visit(
          [&](auto member) {
            using T = std::remove_reference_t<decltype(given.values.*member)>;
            given.set(member, T(v));
          },
          row.member);
      bool resolver_took = true;
      try {
        resolve_sampling(given, gen, "a");
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Err::SamplingInvalid);
        resolver_took = false;
      }
      EXPECT_EQ(parser_took, resolver_took) << row.name << " = " << value;
    }
  }
  RequestSampling hot;
  hot.set(&SamplingParams::temperature, 200.0f);
  testing::expect_error([&] { resolve_sampling(hot, gen, "a"); }, Err::SamplingInvalid,
                        {"temperature must be in [0, 100], got 200"});
  RequestSampling heavy;
  heavy.set(&SamplingParams::repetition_penalty, 20.0f);
  testing::expect_error([&] { resolve_sampling(heavy, gen, "a"); }, Err::SamplingInvalid,
                        {"repetition_penalty must be in (0, 10]"});
}

}  // namespace
}  // namespace qmpi
