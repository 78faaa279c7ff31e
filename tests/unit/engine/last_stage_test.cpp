// The last stage's sampling without MPI: each sequence samples from its own logit row with its
// penalty history (prompt chunks, cached prefix, previous samples) as the sampler alone would,
// all_logits rows come back whole, top alternatives are padded to k, and finished sequences are
// forgotten.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "engine/last_stage.h"
#include "engine/sampler.h"

namespace qmpi {
namespace {

constexpr int64_t V = 16;

std::vector<float> random_rows(size_t rows, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<float> l(rows * V);
  for (float& x : l) x = u(rng);
  return l;
}

StepSeq seq(int64_t id, std::vector<int32_t> tokens, int32_t start, bool first) {
  StepSeq s;
  s.id = id;
  s.tokens = std::move(tokens);
  s.start_pos = start;
  s.first_chunk = first;
  s.sampling.temperature = 0.8f;
  s.sampling.repetition_penalty = 1.7f;
  s.sampling.presence_penalty = 0.5f;
  s.sampling.seed = uint64_t(id) * 31;
  return s;
}

// The oracle: the sampler on the sequence's row with the history it should have.
Sampled expected(const std::vector<float>& logits, size_t row, const StepSeq& s,
                 const std::vector<int32_t>& history, int64_t valid = V) {
  std::vector<float> r(logits.begin() + long(row * V), logits.begin() + long((row + 1) * V));
  return sample_token(r, valid, s.sampling, s.sample_index, history);
}

TEST(LastStage, SamplesEachRowWithItsHistory) {
  std::mt19937 rng(5);
  LastStage last;
  // Step 1: sequence 1 prefills 3 tokens in one chunk; sequence 2 starts on a cached prefix
  // of 2 tokens and is not sampled yet (a chunk before its last); sequence 3 wants all logits.
  StepPlan p1;
  p1.seqs.push_back(seq(1, {4, 4, 7}, 0, true));
  p1.seqs.push_back(seq(2, {9}, 2, true));
  p1.seqs.back().cached_prefix = {3, 3};
  p1.seqs.back().sample = false;
  p1.seqs.push_back(seq(3, {1, 2}, 0, true));
  p1.seqs.back().all_logits = true;
  p1.seqs.back().sample = false;
  std::vector<float> l1 = random_rows(3, rng);  // 1 row for seq 1, 2 rows for seq 3
  const std::vector<float> l1_copy = l1;
  const StepResult r1 = last.finish_step(p1, l1, V);
  ASSERT_EQ(r1.tokens.size(), 1u);
  const Sampled want1 = expected(l1_copy, 0, p1.seqs[0], {4, 4, 7});
  EXPECT_EQ(r1.tokens[0], want1.token);
  EXPECT_FLOAT_EQ(r1.logprobs[0], want1.logprob);
  EXPECT_EQ(r1.logits, std::vector<float>(l1_copy.begin() + V, l1_copy.end()));

  // Step 2: sequence 1 decodes its sample; sequence 2 feeds its last prompt token and samples:
  // their histories carry over (sequence 2's from the cached prefix on).
  StepPlan p2;
  p2.seqs.push_back(seq(1, {r1.tokens[0]}, 3, false));
  p2.seqs.back().sample_index = 1;
  p2.seqs.push_back(seq(2, {6}, 3, false));
  std::vector<float> l2 = random_rows(2, rng);
  const std::vector<float> l2_copy = l2;
  const StepResult r2 = last.finish_step(p2, l2, V);
  ASSERT_EQ(r2.tokens.size(), 2u);
  EXPECT_EQ(r2.tokens[0], expected(l2_copy, 0, p2.seqs[0], {4, 4, 7, r1.tokens[0]}).token);
  EXPECT_EQ(r2.tokens[1], expected(l2_copy, 1, p2.seqs[1], {3, 3, 9, 6}).token);
  EXPECT_EQ(last.live_sequences(), 3u);
  last.forget({1, 3});
  EXPECT_EQ(last.live_sequences(), 1u);
}

// A penalty that only the history explains: the best logit belongs to a token already fed.
TEST(LastStage, ThePenaltyHistoryChangesTheToken) {
  StepPlan p;
  p.seqs.push_back(seq(1, {5, 5, 5}, 0, true));
  p.seqs[0].sampling.temperature = 0.0f;
  p.seqs[0].sampling.repetition_penalty = 4.0f;
  std::vector<float> l(V, 0.0f);
  l[5] = 2.0f;
  l[6] = 1.0f;
  LastStage last;
  EXPECT_EQ(last.finish_step(p, l, V).tokens.at(0), 6);
}

TEST(LastStage, ValidVocabAndPaddedAlternatives) {
  StepPlan p;
  p.valid_vocab = 4;  // rows past the tokenizer's vocabulary are never sampled
  p.seqs.push_back(seq(1, {1}, 0, true));
  p.seqs[0].sampling.temperature = 0.0f;
  p.seqs[0].sampling.repetition_penalty = 1.0f;
  p.seqs[0].sampling.presence_penalty = 0.0f;
  p.seqs[0].sampling.top_logprobs = 6;  // more than the 4 valid ids
  std::vector<float> l(V, 0.0f);
  l[12] = 9.0f;
  l[2] = 1.0f;
  LastStage last;
  const StepResult r = last.finish_step(p, l, V);
  EXPECT_EQ(r.tokens.at(0), 2);
  ASSERT_EQ(r.top_tokens.size(), 6u);
  ASSERT_EQ(r.top_logprobs.size(), 6u);
  EXPECT_EQ(r.top_tokens[0], 2);
  EXPECT_EQ(r.top_tokens[4], -1);
  EXPECT_TRUE(std::isinf(r.top_logprobs[5]) && r.top_logprobs[5] < 0);
}

// The sequences' samples may run in any order and side by side (Backend::run_tasks): the result
// is still in plan order, each sequence with its own row, history and accepted guesses.
TEST(LastStage, TasksInAnyOrderGiveThePlanOrder) {
  std::mt19937 rng(11);
  StepPlan p;
  for (int64_t id = 1; id <= 6; ++id) {
    p.seqs.push_back(seq(id, {int32_t(id), int32_t(id + 1)}, 0, true));
    p.seqs.back().sampling.temperature = id % 2 ? 0.0f : 0.9f;
    p.seqs.back().sampling.top_logprobs = int32_t(id % 3);
  }
  // Sequence 4 carries 1 guess after its 2 prompt tokens: rows for the token and the guess.
  p.seqs[3].tokens.push_back(7);
  p.seqs[3].draft = 1;
  std::vector<float> logits = random_rows(7, rng);
  // Make its guess the greedy pick of its first row, so that it is accepted.
  p.seqs[3].sampling.temperature = 0.0f;
  logits[size_t(3 * V + 7)] = 50.0f;
  std::vector<float> in_order = logits;
  const StepResult want = LastStage().finish_step(p, in_order, V);
  ASSERT_EQ(want.counts, (std::vector<int32_t>{1, 1, 1, 2, 1, 1}));

  const auto reversed = [](int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = n - 1; i >= 0; --i) task(i);
  };
  const auto threads = [](int64_t n, const std::function<void(int64_t)>& task) {
    std::vector<std::thread> ts;
    for (int64_t i = 0; i < n; ++i) ts.emplace_back(task, i);
    for (auto& t : ts) t.join();
  };
  for (const LastStage::TaskRunner& run :
       {LastStage::TaskRunner(reversed), LastStage::TaskRunner(threads)}) {
    std::vector<float> l = logits;
    const StepResult got = LastStage().finish_step(p, l, V, run);
    EXPECT_EQ(got.counts, want.counts);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.logprobs, want.logprobs);
    EXPECT_EQ(got.top_tokens, want.top_tokens);
    EXPECT_EQ(got.top_logprobs, want.top_logprobs);
  }
}

}  // namespace
}  // namespace qmpi
