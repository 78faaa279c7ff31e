// The last stage checking guessed tokens (StepSeq::draft): each row is sampled as a plain
// decode step would sample it, guesses are kept while they equal the samples, the count says
// how many tokens came back, and the penalty history keeps only the accepted guesses. At
// temperature 1 the emitted tokens follow the model's distribution (chi-square tests below).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/last_stage.h"
#include "engine/sampler.h"

namespace qmpi {
namespace {

constexpr int64_t V = 8;

std::vector<float> random_rows(size_t rows, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> l(rows * V);
  for (float& x : l) x = u(rng);
  return l;
}

std::span<float> row(std::vector<float>& l, size_t r) {
  return {l.data() + r * V, size_t(V)};
}

// A decoding sequence: `last` is its last real token (after `history`), then the guesses.
StepSeq guessing(int64_t id, int32_t last, std::vector<int32_t> guesses, uint32_t index) {
  StepSeq s;
  s.id = id;
  s.start_pos = 4;
  s.tokens = {last};
  s.tokens.insert(s.tokens.end(), guesses.begin(), guesses.end());
  s.draft = int32_t(guesses.size());
  s.sample_index = index;
  s.sampling.temperature = 0.9f;
  s.sampling.repetition_penalty = 1.5f;
  s.sampling.presence_penalty = 0.3f;
  s.sampling.seed = 77;
  s.sampling.top_logprobs = 2;
  return s;
}

// Samples the rows in turn as plain decode steps would, with the history growing by each
// accepted guess: the oracle for one sequence.
std::vector<Sampled> plain_samples(std::vector<float> logits, const StepSeq& s,
                                   std::vector<int32_t> history) {
  std::vector<Sampled> out;
  for (int32_t i = 0; i <= s.draft; ++i) {
    out.push_back(
        sample_token(row(logits, size_t(i)), V, s.sampling, s.sample_index + uint32_t(i), history));
    if (i == s.draft || out.back().token != s.tokens[size_t(1 + i)]) break;
    history.push_back(out.back().token);
  }
  return out;
}

TEST(DraftVerification, KeepsTheGuessesTheSamplesAgreeWith) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<int32_t> prompt = {1, 2, 3, 4};
    std::vector<float> logits = random_rows(4, rng);
    // Guesses: the plain samples themselves, with one of them (or none) changed.
    StepSeq s = guessing(1, 5, {0, 0, 0}, uint32_t(trial));
    std::vector<int32_t> history = prompt;
    history.push_back(5);
    for (uint32_t i = 0; i < 3; ++i) {
      std::vector<float> copy = logits;
      s.tokens[1 + i] =
          sample_token(row(copy, i), V, s.sampling, s.sample_index + i, history).token;
      history.push_back(s.tokens[1 + i]);
    }
    const int wrong = trial % 4;  // 3: all right
    if (wrong < 3) s.tokens[size_t(1 + wrong)] = (s.tokens[size_t(1 + wrong)] + 1) % int32_t(V);
    history.resize(5);
    const std::vector<Sampled> want = plain_samples(logits, s, history);
    ASSERT_EQ(want.size(), size_t(wrong < 3 ? wrong + 1 : 4));

    LastStage last;
    StepPlan first;  // the prompt, fed earlier
    first.seqs.push_back(guessing(1, 1, {}, 0));
    first.seqs[0].tokens = prompt;
    first.seqs[0].start_pos = 0;
    first.seqs[0].first_chunk = true;
    first.seqs[0].sample = false;
    last.finish_step(first, {}, V);
    StepPlan p;
    p.seqs.push_back(s);
    const StepResult r = last.finish_step(p, logits, V);
    ASSERT_EQ(r.counts, std::vector<int32_t>{int32_t(want.size())});
    ASSERT_EQ(r.tokens.size(), want.size());
    ASSERT_EQ(r.top_tokens.size(), 2 * want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(r.tokens[i], want[i].token);
      EXPECT_EQ(r.logprobs[i], want[i].logprob);
      EXPECT_EQ(r.top_tokens[2 * i], want[i].top.at(0).token);
    }
    // The next step's penalties see the accepted guesses and the returned token, not the
    // rejected ones.
    std::vector<int32_t> kept = history;
    for (size_t i = 0; i + 1 < want.size(); ++i) kept.push_back(want[i].token);
    kept.push_back(want.back().token);
    StepSeq next = guessing(1, want.back().token, {}, s.sample_index + uint32_t(want.size()));
    next.sampling.repetition_penalty = 3.0f;
    std::vector<float> l2 = random_rows(1, rng);
    const std::vector<Sampled> want2 = plain_samples(l2, next, kept);
    StepPlan p2;
    p2.seqs.push_back(next);
    EXPECT_EQ(last.finish_step(p2, l2, V).tokens.at(0), want2.at(0).token);
  }
}

// Pearson's statistic of `counts` against `probs` (n draws in all).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t n) {
  double x2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * double(n);
    x2 += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
  }
  return x2;
}

std::vector<double> softmax(std::span<const float> l) {
  std::vector<double> p(l.size());
  double sum = 0.0;
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(double(l[i]));
  for (double& x : p) x /= sum;
  return p;
}

// At temperature 1, over many seeds: the first token returned follows the model's
// distribution p whatever the guess, the guess is accepted with probability p(guess), and after
// an accepted guess the next token follows the next row's distribution. The seeds are fixed, so
// the test is deterministic; the thresholds are chi-square's 0.9999 quantiles (7 degrees of
// freedom: 29.88) and 4 standard deviations for the acceptance rate, so a seed set drawn at
// random would fail one of the three checks with probability under 3e-4.
TEST(DraftVerification, TemperatureOneKeepsTheModelsDistribution) {
  std::vector<float> logits = {1.2f, -0.5f, 0.3f,  2.0f, 0.0f, -1.0f, 0.7f,  1.5f,   // row 0
                               0.1f, 1.9f,  -0.3f, 0.4f, 1.1f, 0.2f,  -2.0f, 0.8f};  // row 1
  const std::vector<double> p0 = softmax(row(logits, 0)), p1 = softmax(row(logits, 1));
  const int32_t guess = 7;  // p0 = 0.21
  constexpr int64_t n = 40000;
  std::vector<int64_t> first(V, 0), after(V, 0);
  int64_t accepted = 0;
  LastStage last;
  for (int64_t trial = 0; trial < n; ++trial) {
    StepSeq s = guessing(trial, 3, {guess}, 0);
    s.sampling = {};
    s.sampling.temperature = 1.0f;
    s.sampling.seed = uint64_t(trial) * 0x9e3779b97f4a7c15ull + 12345;
    s.first_chunk = true;
    s.cached_prefix = {0, 1, 2, 3};
    StepPlan p;
    p.seqs.push_back(s);
    std::vector<float> l = logits;
    const StepResult r = last.finish_step(p, l, V);
    last.forget({trial});
    first[size_t(r.tokens.at(0))]++;
    if (r.counts.at(0) == 2) {
      ++accepted;
      after[size_t(r.tokens.at(1))]++;
    } else {
      EXPECT_NE(r.tokens.at(0), guess);
    }
  }
  EXPECT_LT(chi_square(first, p0, n), 29.88);
  const double pa = p0[size_t(guess)];
  EXPECT_NEAR(double(accepted) / double(n), pa, 4.0 * std::sqrt(pa * (1 - pa) / double(n)));
  EXPECT_LT(chi_square(after, p1, accepted), 29.88);
}

}  // namespace
}  // namespace qmpi
