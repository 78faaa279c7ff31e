// The sampler's masks against a plain reference on fixed logits, its seeded streams, and the
// top-logprob report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "core/splitmix64.h"
#include "engine/sampler.h"

namespace qmpi {
namespace {

const std::vector<float> kLogits = {2.0f, 1.5f, 1.4f, 0.2f, -0.5f, 3.0f, 0.9f, -2.0f, 1.0f, 0.0f};

// The reference: softmax at the temperature, then keep the k most likely, then the smallest
// set whose mass reaches top_p, then those at least min_p times the most likely; renormalize.
std::map<int32_t, double> reference(const SamplingParams& p) {
  const size_t V = kLogits.size();
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [](int32_t a, int32_t b) { return kLogits[a] > kLogits[b]; });
  std::vector<double> prob(V);
  double sum = 0;
  for (size_t i = 0; i < V; ++i) sum += prob[i] = std::exp(kLogits[order[i]] / p.temperature);
  size_t keep = p.top_k > 0 ? std::min<size_t>(size_t(p.top_k), V) : V;
  double kept_sum = 0;
  for (size_t i = 0; i < keep; ++i) kept_sum += prob[i];
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += prob[i] / kept_sum;
    if (cum >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  for (size_t i = 1; i < keep; ++i)
    if (prob[i] < p.min_p * prob[0]) {
      keep = i;
      break;
    }
  std::map<int32_t, double> out;
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += prob[i];
  for (size_t i = 0; i < keep; ++i) out[order[i]] = prob[i] / total;
  return out;
}

std::map<int32_t, double> empirical(const SamplingParams& p, int draws) {
  std::map<int32_t, double> freq;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> row = kLogits;
    freq[sample_token(row, int64_t(row.size()), p, uint32_t(i), {}).token] += 1.0 / draws;
  }
  return freq;
}

TEST(Sampler, MasksMatchTheReference) {
  struct Case {
    float temperature, top_p, min_p;
    int32_t top_k;
  };
  for (const Case c :
       {Case{1.0f, 1.0f, 0.0f, 3}, Case{0.7f, 0.8f, 0.0f, -1}, Case{1.3f, 1.0f, 0.2f, -1},
        Case{1.0f, 0.9f, 0.1f, 5}, Case{2.0f, 0.5f, 0.0f, 8}, Case{1.0f, 1.0f, 0.0f, -1}}) {
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    p.seed = 99;
    const auto want = reference(p);
    const auto got = empirical(p, 20000);
    const std::string label =
        "T=" + std::to_string(c.temperature) + " top_k=" + std::to_string(c.top_k) +
        " top_p=" + std::to_string(c.top_p) + " min_p=" + std::to_string(c.min_p);
    for (const auto& [tok, f] : got)
      EXPECT_TRUE(want.count(tok)) << label << ": token " << tok << " is masked but was drawn";
    for (const auto& [tok, pr] : want) {
      const double f = got.count(tok) ? got.at(tok) : 0.0;
      EXPECT_NEAR(f, pr, 0.015) << label << ": token " << tok;
    }
  }
}

TEST(Sampler, GreedyPicksTheArgmaxAndReportsRawLogprob) {
  std::vector<float> row = kLogits;
  SamplingParams p;
  p.temperature = 0.0f;
  const Sampled s = sample_token(row, int64_t(row.size()), p, 0, {});
  EXPECT_EQ(s.token, 5);
  double lse = 0;
  for (float l : kLogits) lse += std::exp(double(l));
  EXPECT_NEAR(s.logprob, 3.0 - std::log(lse), 1e-5);
}

// The greedy pick is the first largest logit, as std::max_element picks, wherever the ties fall
// among the runs the scan compares at once (in one, across two, at the row's ragged end), with
// and without penalties, and -0 ties with +0.
TEST(Sampler, GreedyPicksTheFirstOfEqualLargestLogits) {
  constexpr int32_t kV = 1000;
  const std::vector<std::vector<int32_t>> cases = {{0, 1},     {63, 64}, {64, 70},
                                                   {500, 999}, {999},    {130, 131, 700}};
  for (const auto& at : cases)
    for (bool penalized : {false, true}) {
      std::vector<float> logits(kV);
      for (int32_t i = 0; i < kV; ++i) logits[size_t(i)] = float((i * 29) % 97) / 100.0f;
      for (int32_t i : at) logits[size_t(i)] = 5.0f;
      std::vector<float> row = logits;
      SamplingParams p;
      p.temperature = 0.0f;
      std::vector<int32_t> history;
      if (penalized) {  // the penalty lowers the first tie: the next one is the pick
        p.repetition_penalty = 2.0f;
        history = {at[0]};
      }
      const Sampled s = sample_token(row, kV, p, 0, history);
      const int32_t expect = penalized ? (at.size() > 1 ? at[1] : -1) : at[0];
      if (expect >= 0)
        EXPECT_EQ(s.token, expect) << "ties at " << at[0] << (penalized ? ", penalized" : "");
      else
        EXPECT_EQ(s.token, int32_t(std::max_element(row.begin(), row.end()) - row.begin()));
    }
  std::vector<float> zeros(200, -1.0f);
  zeros[70] = -0.0f;
  zeros[71] = 0.0f;
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_token(zeros, 200, p, 0, {}).token, 70);
  for (int32_t nan_at : {0, 90}) {  // with a NaN the pick is max_element's
    std::vector<float> row(200, -1.0f);
    row[50] = 2.0f;
    row[size_t(nan_at)] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> copy = row;
    EXPECT_EQ(sample_token(row, 200, p, 0, {}).token,
              int32_t(std::max_element(copy.begin(), copy.end()) - copy.begin()))
        << "NaN at " << nan_at;
  }
}

TEST(Sampler, SameSeedAndIndexGiveTheSameToken) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  std::set<int32_t> seen;
  for (uint32_t i = 0; i < 50; ++i) {
    std::vector<float> a = kLogits, b = kLogits;
    const int32_t x = sample_token(a, 10, p, i, {}).token;
    EXPECT_EQ(x, sample_token(b, 10, p, i, {}).token) << "index " << i;
    seen.insert(x);
  }
  EXPECT_GT(seen.size(), 3u) << "a sampled stream should vary across indices";
  // Another seed gives another stream.
  int differ = 0;
  SamplingParams q = p;
  q.seed = 1235;
  for (uint32_t i = 0; i < 50; ++i) {
    std::vector<float> a = kLogits, b = kLogits;
    differ += sample_token(a, 10, p, i, {}).token != sample_token(b, 10, q, i, {}).token;
  }
  EXPECT_GT(differ, 10);
}

TEST(Sampler, ChoiceSeedsAreDistinctAndKeepChoiceZero) {
  EXPECT_EQ(choice_seed(77, 0), 77u);
  std::set<uint64_t> seeds;
  for (uint32_t c = 0; c < 16; ++c) seeds.insert(choice_seed(77, c));
  EXPECT_EQ(seeds.size(), 16u);
}

TEST(Sampler, TopLogprobsAreTheRawMostLikely) {
  std::vector<float> row = kLogits;
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_logprobs = 4;
  p.repetition_penalty = 2.0f;  // penalties change the pick, not the raw report
  const std::vector<int32_t> history = {5};
  const Sampled s = sample_token(row, 10, p, 0, history);
  ASSERT_EQ(s.top.size(), 4u);
  EXPECT_EQ(s.top[0].token, 5);
  EXPECT_EQ(s.top[1].token, 0);
  EXPECT_EQ(s.top[2].token, 1);
  EXPECT_EQ(s.top[3].token, 2);
  EXPECT_EQ(s.token, 0) << "3.0 / 2 = 1.5 falls below token 0's 2.0";
  EXPECT_FLOAT_EQ(s.logprob, s.top[1].logprob);
}

// Each distinct token is penalized once, by how often it was seen; ids outside the vocabulary
// are ignored; the picked token's logprob is of its raw logit.
TEST(Sampler, PenaltiesCountEachSeenTokenOnce) {
  std::vector<float> row = kLogits;
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.4f;
  const std::vector<int32_t> history = {0, 5, 0, 7, -1, 0, 12, 5};
  const Sampled s = sample_token(row, 10, p, 0, history);
  EXPECT_FLOAT_EQ(row[0], 2.0f / 1.5f - (0.5f + 0.4f * 3));
  EXPECT_FLOAT_EQ(row[5], 3.0f / 1.5f - (0.5f + 0.4f * 2));
  EXPECT_FLOAT_EQ(row[7], -2.0f * 1.5f - (0.5f + 0.4f));
  for (int t : {1, 2, 3, 4, 6, 8, 9}) EXPECT_EQ(row[t], kLogits[t]) << "token " << t;
  EXPECT_EQ(s.token, 1) << "1.5 is the best logit once 5 (0.7) and 0 (-0.37) are penalized";
  double lse = 0;
  for (float l : kLogits) lse += std::exp(double(l));
  EXPECT_NEAR(s.logprob, 1.5 - std::log(lse), 1e-5);
}

// Top-k and the top-logprob report keep the k largest logits, the lowest ids first among equal
// ones, on a vocabulary wide enough that the selection discards candidates many times over: 4000
// logits taking 50 values, each value at 80 ids spread over the row.
TEST(Sampler, TopKKeepsTheLowestIdsAmongEqualLogits) {
  constexpr int32_t kV = 4000, kK = 7;
  std::vector<float> logits(kV);
  for (int32_t i = 0; i < kV; ++i) logits[size_t(i)] = float((i * 37) % 50) / 4.0f;
  std::vector<int32_t> best;  // ids of the largest value, ascending
  for (int32_t i = 0; i < kV; ++i)
    if ((i * 37) % 50 == 49) best.push_back(i);
  ASSERT_EQ(best.size(), 80u);

  SamplingParams p;
  p.temperature = 1000.0f;  // close to uniform over what top-k keeps
  p.top_k = kK;
  p.seed = 5;
  p.top_logprobs = 20;
  std::set<int32_t> drawn;
  for (uint32_t i = 0; i < 2000; ++i) {
    std::vector<float> row = logits;
    const Sampled s = sample_token(row, kV, p, i, {});
    drawn.insert(s.token);
    if (i == 0) {
      ASSERT_EQ(s.top.size(), 20u);
      for (size_t j = 0; j < 20; ++j) EXPECT_EQ(s.top[j].token, best[j]) << "alternative " << j;
    }
  }
  EXPECT_EQ(drawn, std::set<int32_t>(best.begin(), best.begin() + kK));
}

// A full sort of the row: ranked by logit (lowest id on ties), probabilities at the temperature
// over every unmasked id, the top-p prefix, then the min-p floor; pick() scales the draw by what
// is kept.
struct FullSort {
  std::vector<int32_t> order;
  std::vector<double> prob;

  FullSort(const std::vector<float>& logits, const SamplingParams& p) {
    for (size_t i = 0; i < logits.size(); ++i)
      if (!std::isinf(logits[i])) order.push_back(int32_t(i));
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    const double top = logits[size_t(order[0])];
    double sum = 0;
    for (int32_t id : order) {
      prob.push_back(std::exp((double(logits[size_t(id)]) - top) / p.temperature));
      sum += prob.back();
    }
    size_t keep = prob.size();
    double cum = 0;
    for (size_t i = 0; i < keep && p.top_p < 1.0f; ++i)
      if ((cum += prob[i] / sum) >= p.top_p) keep = i + 1;
    for (size_t i = 1; i < keep; ++i)
      if (prob[i] < p.min_p * prob[0]) keep = i;
    prob.resize(keep);
  }

  int32_t pick(double uniform) const {
    const double u = uniform * std::accumulate(prob.begin(), prob.end(), 0.0);
    double cum = 0;
    for (size_t i = 0; i < prob.size(); ++i)
      if (u < (cum += prob[i])) return order[i];
    return order[prob.size() - 1];
  }
};

// Without top-k, the top-p or min-p cut and the draw itself fall in a prefix of the ranked row
// that the sampler finds without sorting the whole vocabulary; the picks are those of a full
// sort, for peaked rows (a prefix of a few tokens), wider ones (hundreds), flat ones (most of the
// row), a masked row, and with the temperature alone.
TEST(Sampler, WithoutTopKThePicksAreAFullSortsPicks) {
  constexpr size_t kV = 20000;
  uint64_t state = 17;
  const auto normal = [&] {  // Box-Muller on splitmix64 draws
    const double a = double((state = splitmix64(state)) >> 11) * 0x1.0p-53 + 1e-300;
    const double b = double((state = splitmix64(state)) >> 11) * 0x1.0p-53;
    return std::sqrt(-2 * std::log(a)) * std::cos(2 * M_PI * b);
  };
  struct Case {
    double spread;
    float temperature, top_p, min_p;
    bool masked;
  };
  for (const Case c : {Case{5, 0.7f, 0.9f, 0.0f, false}, Case{4, 1.0f, 0.95f, 0.0f, false},
                       Case{3, 1.0f, 1.0f, 0.05f, false}, Case{2.5, 0.8f, 0.8f, 0.02f, false},
                       Case{2, 1.0f, 0.9f, 0.0f, false}, Case{0.5, 1.3f, 1.0f, 0.5f, false},
                       Case{1, 1.0f, 0.9f, 0.0f, false}, Case{4, 1.0f, 0.95f, 0.0f, true},
                       Case{4, 0.7f, 1.0f, 0.0f, false}, Case{1, 1.0f, 1.0f, 0.0f, false}}) {
    std::vector<float> logits(kV);
    for (float& l : logits) l = float(c.spread * normal());
    if (c.masked)  // a constraint leaving every third id
      for (size_t i = 0; i < kV; ++i)
        if (i % 3) logits[i] = -std::numeric_limits<float>::infinity();
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.seed = 321;
    const FullSort want(logits, p);
    std::set<int32_t> drawn;
    for (uint32_t i = 0; i < 200; ++i) {
      std::vector<float> row = logits;
      const int32_t got = sample_token(row, int64_t(kV), p, i, {}).token;
      ASSERT_EQ(got, want.pick(sampling_uniform(p.seed, i)))
          << "spread " << c.spread << " T=" << c.temperature << " top_p=" << c.top_p
          << " min_p=" << c.min_p << (c.masked ? " masked" : "") << ", draw " << i;
      drawn.insert(got);
    }
    EXPECT_GT(drawn.size(), 1u) << "spread " << c.spread << ": the draws should vary";
  }
}

TEST(Sampler, OnlyValidVocabIsSampled) {
  std::vector<float> row = kLogits;
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_token(row, 5, p, 0, {}).token, 0);  // token 5 (the max) is past the vocab
}

TEST(Sampler, AllowedMaskKeepsToItsIdsAndReportsTheMaskedDistribution) {
  const std::vector<uint64_t> allowed = {(uint64_t(1) << 3) | (uint64_t(1) << 6)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_logprobs = 3;
  std::map<int32_t, int> seen;
  Sampled last;
  for (uint32_t i = 0; i < 300; ++i) {
    std::vector<float> row = kLogits;
    last = sample_token(row, int64_t(row.size()), p, i, {}, allowed);
    seen[last.token]++;
  }
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[3], 0);
  EXPECT_GT(seen[6], 0);
  // logprobs: log-softmax over the two allowed ids only (vLLM's convention).
  const double lse = std::log(std::exp(double(kLogits[3])) + std::exp(double(kLogits[6])));
  const int32_t t = last.token;
  EXPECT_NEAR(last.logprob, double(kLogits[size_t(t)]) - lse, 1e-5);
  ASSERT_EQ(last.top.size(), 3u);
  EXPECT_TRUE(std::isinf(last.top[2].logprob)) << "a masked id has probability zero";
  std::vector<float> row = kLogits;
  p.temperature = 0.0f;
  EXPECT_EQ(sample_token(row, int64_t(row.size()), p, 0, {}, allowed).token,
            kLogits[3] >= kLogits[6] ? 3 : 6);
}

}  // namespace
}  // namespace qmpi
