// The step wire format: every field of a plan and a result survives encode -> decode, another
// version is refused with StepMessage, and a seeded fuzz of truncated and garbled messages never
// crashes the decoder: each one decodes or raises StepMessage.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "../expect_error.h"
#include "engine/step_plan.h"

namespace qmpi {
namespace {

StepSeq seq(int64_t id, std::mt19937& rng) {
  StepSeq s;
  s.id = id;
  s.start_pos = int32_t(rng() % 1000);
  for (uint32_t i = 0, n = 1 + rng() % 9; i < n; ++i) s.tokens.push_back(int32_t(rng() % 150000));
  s.draft = int32_t(rng() % s.tokens.size());
  for (uint32_t i = 0, n = rng() % 5; i < n; ++i) s.block_table.push_back(int32_t(rng() % 4096));
  s.all_logits = rng() % 2;
  s.sample = rng() % 2;
  s.first_chunk = rng() % 2;
  s.sampling.temperature = float(rng() % 100) / 50;
  s.sampling.top_p = 0.25f + float(rng() % 4) / 8;
  s.sampling.top_k = int32_t(rng() % 50) - 1;
  s.sampling.min_p = float(rng() % 10) / 20;
  s.sampling.repetition_penalty = 1.0f + float(rng() % 10) / 10;
  s.sampling.presence_penalty = float(rng() % 5) / 4 - 0.5f;
  s.sampling.frequency_penalty = float(rng() % 5) / 8;
  s.sampling.seed = (uint64_t(rng()) << 32) | rng();
  s.sampling.top_logprobs = int32_t(rng() % 21);
  s.sample_index = rng();
  for (uint32_t i = 0, n = rng() % 4; i < n; ++i) s.cached_prefix.push_back(int32_t(rng() % 99));
  if (rng() % 2) s.allowed.assign(rng() % 5, (uint64_t(rng()) << 32) | rng());
  s.adapter = int32_t(rng() % 4) - 1;
  return s;
}

StepPlan plan(std::mt19937& rng) {
  StepPlan p;
  p.shutdown = rng() % 7 == 0;
  p.poll_stop = rng() % 5 == 0;
  p.valid_vocab = int64_t(rng() % 200000);
  for (int64_t i = 0, n = rng() % 6; i < n; ++i) p.seqs.push_back(seq(100 + i, rng));
  for (uint32_t i = 0, n = rng() % 4; i < n; ++i) p.finished.push_back(int64_t(rng()));
  return p;
}

void expect_same(const SamplingParams& a, const SamplingParams& b) {
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.min_p, b.min_p);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.top_logprobs, b.top_logprobs);
}

void expect_same(const StepPlan& a, const StepPlan& b) {
  EXPECT_EQ(a.shutdown, b.shutdown);
  EXPECT_EQ(a.poll_stop, b.poll_stop);
  EXPECT_EQ(a.valid_vocab, b.valid_vocab);
  EXPECT_EQ(a.finished, b.finished);
  ASSERT_EQ(a.seqs.size(), b.seqs.size());
  for (size_t i = 0; i < a.seqs.size(); ++i) {
    const StepSeq &x = a.seqs[i], &y = b.seqs[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.start_pos, y.start_pos);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.draft, y.draft);
    EXPECT_EQ(x.block_table, y.block_table);
    EXPECT_EQ(x.all_logits, y.all_logits);
    EXPECT_EQ(x.sample, y.sample);
    EXPECT_EQ(x.first_chunk, y.first_chunk);
    expect_same(x.sampling, y.sampling);
    EXPECT_EQ(x.sample_index, y.sample_index);
    EXPECT_EQ(x.cached_prefix, y.cached_prefix);
    EXPECT_EQ(x.allowed, y.allowed);
    EXPECT_EQ(x.adapter, y.adapter);
  }
}

TEST(StepWire, PlansAndResultsRoundTrip) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const StepPlan p = plan(rng);
    const std::vector<uint8_t> bytes = encode_step_plan(p);
    EXPECT_EQ(bytes.at(0), kStepWireVersion);
    expect_same(decode_step_plan(bytes), p);
  }
  StepResult r;
  r.counts = {1, 1};
  r.tokens = {5, 9};
  r.logprobs = {-0.5f, -1.25f};
  r.logits = {1, 2, 3, 4, 5, 6};
  r.top_tokens = {5, 4, -1, 9};
  r.top_logprobs = {-0.5f, -2.0f, -1e30f, -1.25f};
  const StepResult back = decode_step_result(encode_step_result(r));
  EXPECT_EQ(back.counts, r.counts);
  EXPECT_EQ(back.tokens, r.tokens);
  EXPECT_EQ(back.logprobs, r.logprobs);
  EXPECT_EQ(back.logits, r.logits);
  EXPECT_EQ(back.top_tokens, r.top_tokens);
  EXPECT_EQ(back.top_logprobs, r.top_logprobs);
}

TEST(StepWire, AnotherVersionIsRefused) {
  std::mt19937 rng(1);
  std::vector<uint8_t> bytes = encode_step_plan(plan(rng));
  bytes[0] = uint8_t(kStepWireVersion + 1);
  testing::expect_error([&] { decode_step_plan(bytes); }, Err::StepMessage,
                        {"version " + std::to_string(kStepWireVersion + 1),
                         "reads version " + std::to_string(kStepWireVersion)});
  std::vector<uint8_t> result = encode_step_result(StepResult{});
  result[0] = 0;
  testing::expect_error([&] { decode_step_result(result); }, Err::StepMessage, {"version 0"});
}

// Rows are grouped by LoRA adapter for every rank alike: a group per adapter in order of first
// appearance, holding its sequences' rows even when other sequences come between; base-model
// rows are in no group.
TEST(StepWire, LoraRowsAreGroupedByAdapter) {
  StepPlan p;
  const int32_t adapters[] = {1, -1, 0, 1};
  for (int i = 0; i < 4; ++i) {
    StepSeq s;
    s.id = i;
    s.tokens.assign(size_t(i % 2 ? 1 : 2), 7);  // rows 0-1, 2, 3-4, 5
    s.block_table = {i};
    s.adapter = adapters[i];
    p.seqs.push_back(s);
  }
  const BatchInput b = make_batch(p, 8);
  ASSERT_EQ(b.lora.size(), 2u);
  EXPECT_EQ(b.lora[0].adapter, 1);
  EXPECT_EQ(b.lora[0].rows, (std::vector<int32_t>{0, 1, 5}));
  EXPECT_EQ(b.lora[1].adapter, 0);
  EXPECT_EQ(b.lora[1].rows, (std::vector<int32_t>{3, 4}));
  for (StepSeq& s : p.seqs) s.adapter = -1;
  EXPECT_TRUE(make_batch(p, 8).lora.empty());
}

// A sequence with guesses needs the logits after its last real token and after each guess; a
// plan whose guesses are not trailing sampled tokens is refused.
TEST(StepWire, GuessesGetALogitRowEach) {
  StepPlan p;
  StepSeq plain;
  plain.id = 1;
  plain.tokens = {4, 5, 6};
  plain.block_table = {0};
  StepSeq guessing;
  guessing.id = 2;
  guessing.start_pos = 7;
  guessing.tokens = {9, 10, 11, 12};
  guessing.draft = 3;
  guessing.block_table = {1, 2};
  p.seqs = {plain, guessing};
  const BatchInput b = make_batch(p, 8);
  EXPECT_EQ(b.logit_rows, (std::vector<int32_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 7, 8, 9, 10}));
  EXPECT_EQ(b.slots, (std::vector<int32_t>{0, 1, 2, 15, 16, 17, 18}));
  p.seqs[1].draft = 4;  // no real token left to sample after
  testing::expect_error([&] { make_batch(p, 8); }, Err::Internal, {"4 guesses among 4"});
  p.seqs[1].draft = 1;
  p.seqs[1].sample = false;
  testing::expect_error([&] { make_batch(p, 8); }, Err::Internal, {"guesses"});
}

TEST(StepWire, TruncatedOrTrailingBytesAreRefused) {
  std::mt19937 rng(3);
  StepPlan p = plan(rng);
  p.seqs.push_back(seq(1, rng));
  const std::vector<uint8_t> bytes = encode_step_plan(p);
  for (size_t n = 0; n < bytes.size(); ++n)
    testing::expect_error([&] { decode_step_plan(std::span<const uint8_t>(bytes.data(), n)); },
                          Err::StepMessage, {"step plan"});
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  testing::expect_error([&] { decode_step_plan(longer); }, Err::StepMessage, {"left over"});
}

// Random damage to valid messages (flipped bytes, huge counts, cut ends): the decoder gives a
// plan or StepMessage, never another error, a crash or a huge allocation.
TEST(StepWire, GarbledMessagesNeverCrashTheDecoder) {
  std::mt19937 rng(20261201);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bytes = encode_step_plan(plan(rng));
    switch (rng() % 3) {
      case 0:  // flip a few bytes after the version
        for (uint32_t k = 0, n = 1 + rng() % 4; k < n && bytes.size() > 1; ++k)
          bytes[1 + rng() % (bytes.size() - 1)] ^= uint8_t(1 + rng() % 255);
        break;
      case 1: {  // a huge count somewhere
        const uint64_t huge = ~uint64_t(0) >> (rng() % 8);
        const size_t at = 1 + rng() % (bytes.size() - 1);
        if (at + sizeof huge <= bytes.size()) std::memcpy(bytes.data() + at, &huge, sizeof huge);
        break;
      }
      default:  // cut, then flip
        bytes.resize(1 + rng() % bytes.size());
        if (bytes.size() > 1) bytes[1 + rng() % (bytes.size() - 1)] ^= 0x80;
    }
    try {
      decode_step_plan(bytes);
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), Err::StepMessage) << e.message();
      ++refused;
    }
  }
  EXPECT_GT(refused, 500) << "the damage should make many messages unreadable";
}

}  // namespace
}  // namespace qmpi
