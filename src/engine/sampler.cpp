#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "core/splitmix64.h"
#include "kernels/cpu/log_sum_exp.h"

namespace qmpi {
namespace {

// HF's repetition penalty (divide positive logits, multiply negative ones) and OpenAI's
// presence/frequency penalties, each over the distinct tokens the sequence has seen. Returns those
// tokens with their logits before the penalties. Counted in a table over the vocabulary, not a
// hash map: the history holds the whole context (32k tokens and more), and this runs every step.
std::vector<std::pair<int32_t, float>> apply_penalties(std::span<float> row,
                                                       const SamplingParams& p,
                                                       std::span<const int32_t> history) {
  std::vector<int32_t> count(row.size(), 0);
  for (int32_t t : history)
    if (t >= 0 && size_t(t) < row.size()) ++count[size_t(t)];
  std::vector<std::pair<int32_t, float>> raw;
  for (int32_t t : history) {
    if (t < 0 || size_t(t) >= row.size() || count[size_t(t)] == 0) continue;
    float& l = row[size_t(t)];
    raw.emplace_back(t, l);
    if (p.repetition_penalty != 1.0f)
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= p.presence_penalty + p.frequency_penalty * float(count[size_t(t)]);
    count[size_t(t)] = 0;  // each token once
  }
  return raw;
}

// A key whose ascending order is the candidates' order: the larger logit first, the lower id on
// ties (the greedy pick's).
uint64_t rank_key(float logit, int32_t id) {
  if (logit == 0.0f) logit = 0.0f;  // -0 ties with +0
  uint32_t b;
  std::memcpy(&b, &logit, sizeof b);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // ascending with the float
  return (uint64_t(~b) << 32) | uint32_t(id);
}

// Sorts rank keys made in ascending id order by their logit half alone: a stable LSD radix sort
// (three passes of 11 bits) keeps the ids ascending among equal logits. std::sort of the keys of
// a 152k-entry row took 10-15 ms; the passes take a few.
void sort_by_logit(std::vector<uint64_t>& keys) {
  std::vector<uint64_t> spare(keys.size());
  for (int shift = 32; shift < 64; shift += 11) {
    std::array<size_t, 2048> start{};
    for (uint64_t k : keys) ++start[(k >> shift) & 2047];
    size_t at = 0;
    for (size_t& s : start) at += std::exchange(s, at);
    for (uint64_t k : keys) spare[start[(k >> shift) & 2047]++] = k;
    keys.swap(spare);
  }
}

// The ids of the row's entries by logit, largest first (lowest id on ties), only the top_k first
// where top_k > 0. Qwen's default sampling (top-k 20) ran nth_element over all 152k ids, 1.6-1.7
// ms a sampled token, serial on the last stage for every sequence of a step; the top k are now
// kept in one pass that compares each logit with the k-th best so far and keys only the few that
// beat it (0.10 ms). Without top-k the whole vocabulary is sorted (sort_by_logit).
std::vector<int32_t> ranked(std::span<const float> row, int32_t top_k) {
  const size_t V = row.size();
  std::vector<uint64_t> keys;
  if (top_k > 0 && size_t(top_k) < V) {
    const size_t k = size_t(top_k);
    keys.reserve(2 * k);
    float bar = -std::numeric_limits<float>::infinity();  // the k-th best logit so far
    uint64_t worst = ~uint64_t(0);                        // and its key
    for (size_t i = 0; i < V; ++i) {
      if (row[i] < bar) continue;
      const uint64_t key = rank_key(row[i], int32_t(i));
      if (key >= worst) continue;
      keys.push_back(key);
      if (keys.size() == 2 * k) {
        std::nth_element(keys.begin(), keys.begin() + long(k - 1), keys.end());
        keys.resize(k);
        worst = keys[k - 1];
        bar = row[size_t(uint32_t(worst))];
      }
    }
    std::sort(keys.begin(), keys.end());
    if (keys.size() > k) keys.resize(k);
  } else {
    keys.resize(V);
    for (size_t i = 0; i < V; ++i) keys[i] = rank_key(row[i], int32_t(i));
    sort_by_logit(keys);
  }
  std::vector<int32_t> ids(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) ids[i] = int32_t(uint32_t(keys[i]));
  return ids;
}

// The k largest entries of the raw row, as log-probabilities, most likely first (lowest id on
// ties, like the greedy pick).
std::vector<TokenLogprob> top_of(std::span<const float> row, double lse, int32_t k) {
  if (k <= 0) return {};
  const std::vector<int32_t> idx = ranked(row, k);
  std::vector<TokenLogprob> top(std::min<size_t>(size_t(k), idx.size()));
  for (size_t i = 0; i < top.size(); ++i)
    top[i] = {idx[i], float(double(row[size_t(idx[i])]) - lse)};
  return top;
}

// The index of the row's first largest entry, std::max_element's pick. max_element runs one
// entry a cycle, a greedy pick 0.04 ms for every sequence of a step; here one vectorized pass
// finds the largest value and a second compares 64 entries at a time with it, scanning only the
// run that holds it. A row with a NaN takes max_element, whose pick then depends on where it is.
size_t first_max(std::span<const float> row) {
  float m = -std::numeric_limits<float>::infinity();
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (size_t i = 0; i < row.size(); ++i) {
    m = row[i] > m ? row[i] : m;
    nan |= int(row[i] != row[i]);
  }
  constexpr size_t kRun = 64;
  for (size_t b = 0; !nan && b < row.size(); b += kRun) {
    const size_t e = std::min(row.size(), b + kRun);
    bool hit = false;
#pragma omp simd reduction(| : hit)
    for (size_t i = b; i < e; ++i) hit |= row[i] == m;
    if (hit)
      for (size_t i = b; i < e; ++i)
        if (row[i] == m) return i;
  }
  return size_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// The tokens a sampled pick can take, most likely first, with their probabilities at the
// temperature (over the whole row, or over the top k with top-k).
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> prob;

  // Keeps the smallest prefix whose mass reaches top_p (at least one token), then the tokens at
  // least min_p times the most likely one. Returns whether a cut fell inside, so that the prefix
  // of the ranked row held here is known to hold every candidate.
  bool cut(const SamplingParams& p) {
    bool inside = false;
    size_t n = prob.size();
    if (p.top_p < 1.0f) {
      double cum = 0.0;
      for (size_t i = 0; i < prob.size(); ++i)
        if ((cum += prob[i]) >= double(p.top_p)) {
          n = i + 1;
          inside = true;
          break;
        }
    }
    if (p.min_p > 0.0f && n > 0) {
      const double floor = double(p.min_p) * prob[0];
      for (size_t i = 1; i < n; ++i)
        if (prob[i] < floor) {
          n = i;
          inside = true;
          break;
        }
    }
    ids.resize(n);
    prob.resize(n);
    return inside;
  }

  // The candidate where the running mass passes `target`, or -1 where it never does.
  int32_t at_mass(double target) const {
    double cum = 0.0;
    for (size_t i = 0; i < prob.size(); ++i)
      if (target < (cum += prob[i])) return ids[i];
    return -1;
  }

  // The pick for a uniform draw u in [0, 1): the candidates are not renormalized after the cuts,
  // the draw is scaled by their mass instead.
  int32_t pick(double u) const {
    const int32_t tok = at_mass(u * std::accumulate(prob.begin(), prob.end(), 0.0));
    return tok >= 0 ? tok : ids.back();
  }
};

// Temperature, top-k, top-p and min-p, then the draw u. The order of the candidates decides
// which token a draw lands on, so every path picks what sorting the whole row would.
int32_t draw(std::span<const float> row, const SamplingParams& p, double u) {
  const size_t V = row.size();
  const double inv_t = 1.0 / double(p.temperature);
  Candidates c;
  // Probabilities relative to the most likely candidate, divided by `sum` (by their own sum
  // where it is 0).
  const auto fill = [&](double sum) {
    // Masked ids (-inf) are never candidates; the mask always leaves at least one.
    while (c.ids.size() > 1 && std::isinf(row[size_t(c.ids.back())]) &&
           row[size_t(c.ids.back())] < 0)
      c.ids.pop_back();
    const double top = double(row[size_t(c.ids[0])]);
    c.prob.resize(c.ids.size());
    double own = 0.0;
    for (size_t i = 0; i < c.ids.size(); ++i)
      own += c.prob[i] = std::exp((double(row[size_t(c.ids[i])]) - top) * inv_t);
    for (double& q : c.prob) q /= sum > 0.0 ? sum : own;
  };
  // Without top-k the candidates up to a top-p or min-p cut, or up to the draw itself, are a
  // prefix of the ranked row, usually a few dozen tokens: rank the top k' in one pass,
  // normalized by one vectorized sum over the whole row, and widen k' until the cut or the draw
  // falls inside. Sorting all 152k ids took 12-16 ms a sampled token; only a flat distribution
  // (random weights) or a draw deep in the tail still ends in the full sort. The vectorized sum is
  // good to about 1e-6, so a draw that close to a boundary may land on its neighbour.
  if (p.top_k <= 0 || size_t(p.top_k) >= V) {
    const cpu::LogSumExp all = cpu::log_sum_exp(row.data(), int64_t(V), float(inv_t));
    const double sum = std::exp(all.lse - double(all.max) * inv_t);
    const bool cuts = p.top_p < 1.0f || p.min_p > 0.0f;
    // The mass the prefix must reach: top-p's, or the draw's without cuts (min-p sets none).
    const double target = p.top_p < 1.0f ? double(p.top_p) : cuts ? 0.0 : u;
    for (double k = 64; k < double(V / 8);) {
      c.ids = ranked(row, int32_t(k));
      fill(sum);
      if (c.cut(p)) return c.pick(u);
      if (const int32_t tok = cuts ? -1 : c.at_mass(u); tok >= 0) return tok;
      // Every later token is at most as likely as the prefix's last, so a flat row goes
      // straight to the full sort instead of ranking ever wider prefixes first.
      const double missing = target - std::accumulate(c.prob.begin(), c.prob.end(), 0.0);
      k = std::max(k * 16, c.prob.back() > 0 ? k + missing / c.prob.back() : double(V));
    }
  }
  c.ids = ranked(row, p.top_k);
  fill(0.0);
  c.cut(p);
  return c.pick(u);
}

}  // namespace

uint64_t choice_seed(uint64_t seed, uint32_t choice) {
  return choice == 0 ? seed : splitmix64(seed ^ (uint64_t(choice) * kGoldenGamma));
}

double sampling_uniform(uint64_t seed, uint32_t index) {
  const uint64_t r = splitmix64(splitmix64(seed) ^ (uint64_t(index) * 0xd1b54a32d192ed03ull));
  return double(r >> 11) * 0x1.0p-53;
}

Sampled sample_token(std::span<float> logits, int64_t valid_vocab, const SamplingParams& p,
                     uint32_t sample_index, std::span<const int32_t> history,
                     std::span<const uint64_t> allowed) {
  const size_t V = std::min<size_t>(size_t(valid_vocab), logits.size());
  std::span<float> row = logits.first(V);
  if (!allowed.empty()) {
    constexpr float kOff = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < V; ++i)
      if (i / 64 >= allowed.size() || !((allowed[i / 64] >> (i % 64)) & 1)) row[i] = kOff;
  }

  // Raw log-softmax for the reported logprob (vectorized: it spans the whole vocabulary for
  // every sampled token).
  const double raw_lse = cpu::log_sum_exp(row.data(), int64_t(row.size())).lse;
  std::vector<TokenLogprob> alternatives;
  if (p.top_logprobs > 0) alternatives = top_of(row, raw_lse, p.top_logprobs);

  // Penalties change the row in place; the reported logprob is of the raw value.
  std::vector<std::pair<int32_t, float>> raw;
  if (!history.empty() &&
      (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f))
    raw = apply_penalties(row, p, history);
  const auto logprob = [&](int32_t tok) {
    const auto it =
        std::find_if(raw.begin(), raw.end(), [&](const auto& e) { return e.first == tok; });
    return float(double(it != raw.end() ? it->second : row[size_t(tok)]) - raw_lse);
  };

  if (p.greedy() || p.top_k == 1) {
    const auto tok = int32_t(first_max(row));
    return {tok, logprob(tok), std::move(alternatives)};
  }

  const int32_t tok = draw(row, p, sampling_uniform(p.seed, sample_index));
  return {tok, logprob(tok), std::move(alternatives)};
}

}  // namespace qmpi
