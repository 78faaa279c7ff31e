// A StepRunner without MPI or weights for the scheduler tests. It keeps a paged "KV cache" of
// token ids: every step writes each sequence's new tokens into the slots its block table names
// and reads the whole context back through the table. The logits of a position are a hash of the
// context read back, sampled by the real sampler, so a wrong block table, a block reused while
// still in use, or a wrong penalty history changes the output, and the outputs of a request
// are the same whatever else runs with it. It checks the plan's invariants as it goes.
// With depth > 1 it stands for a pipeline: steps run when submitted (the first stage's order)
// and come back in order, and no two steps in flight may share a sequence or a block that one
// of them writes.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace qmpi::test {

class FakeModel final : public StepRunner {
 public:
  FakeModel(int64_t num_blocks, int block_size, int64_t vocab = 64, int depth = 1)
      : slots_(size_t(num_blocks * block_size), -1),
        block_size_(block_size),
        vocab_(vocab),
        depth_(depth) {}

  int depth() const override { return depth_; }
  void submit(const StepPlan& plan) override {
    EXPECT_LT(in_flight_.size(), size_t(depth_)) << "more steps in flight than the pipeline";
    for (const StepPlan& other : in_flight_) expect_disjoint(plan, other);
    in_flight_.push_back(plan);
    max_in_flight_ = std::max(max_in_flight_, in_flight_.size());
    StepRunner::submit(plan);
  }
  StepResult collect() override {
    EXPECT_FALSE(in_flight_.empty());
    if (!in_flight_.empty()) in_flight_.erase(in_flight_.begin());
    return StepRunner::collect();
  }

  StepResult run(const StepPlan& plan) override {
    StepResult r;
    max_seqs_ = std::max(max_seqs_, plan.seqs.size());
    int64_t tokens = 0;
    for (const auto& s : plan.seqs) {
      tokens += int64_t(s.tokens.size());
      const int64_t ctx = s.start_pos + int64_t(s.tokens.size());
      EXPECT_GE(int64_t(s.block_table.size()) * block_size_, ctx) << "seq " << s.id;
      auto& hist = history_[s.id];
      if (s.first_chunk) {
        hist = s.cached_prefix;
        EXPECT_EQ(int64_t(s.cached_prefix.size()), s.start_pos) << "seq " << s.id;
      }
      EXPECT_EQ(int64_t(hist.size()), s.start_pos) << "seq " << s.id << ": history out of step";
      for (size_t i = 0; i < s.tokens.size(); ++i) slot(s, s.start_pos + int64_t(i)) = s.tokens[i];
      hist.insert(hist.end(), s.tokens.begin(), s.tokens.end());
      // The cache must give back exactly the sequence's tokens.
      std::vector<int32_t> read(static_cast<size_t>(ctx));
      for (int64_t p = 0; p < ctx; ++p) read[size_t(p)] = slot(s, p);
      EXPECT_EQ(read, hist) << "seq " << s.id << ": KV cache content differs from its tokens";
      if (!s.sample) continue;
      std::vector<float> logits = logits_for(read);
      const Sampled sm = sample_token(logits, vocab_, s.sampling, s.sample_index, hist, s.allowed);
      r.tokens.push_back(sm.token);
      r.logprobs.push_back(sm.logprob);
      for (const auto& t : sm.top) {
        r.top_tokens.push_back(t.token);
        r.top_logprobs.push_back(t.logprob);
      }
    }
    max_tokens_ = std::max(max_tokens_, tokens);
    for (int64_t id : plan.finished) history_.erase(id);
    ++steps_;
    plans_.push_back(plan);
    return r;
  }

  // Logits of the position after `ctx`: pseudo-random in [-4, 4), a function of ctx alone.
  std::vector<float> logits_for(const std::vector<int32_t>& ctx) const {
    uint64_t h = 0x1234567;
    for (int32_t t : ctx) h = mix(h ^ uint64_t(uint32_t(t)));
    std::vector<float> l(static_cast<size_t>(vocab_));
    for (int64_t v = 0; v < vocab_; ++v)
      l[size_t(v)] = float(double(mix(h + uint64_t(v)) >> 11) * 0x1.0p-53 * 8.0 - 4.0);
    return l;
  }

  size_t max_seqs() const { return max_seqs_; }
  size_t max_in_flight() const { return max_in_flight_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t steps() const { return steps_; }
  size_t live_histories() const { return history_.size(); }
  const std::vector<StepPlan>& plans() const { return plans_; }

 private:
  static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  // Blocks a step writes: those holding its new tokens.
  std::vector<int32_t> written(const StepPlan& p) const {
    std::vector<int32_t> w;
    for (const auto& s : p.seqs)
      for (int64_t pos = s.start_pos; pos < s.start_pos + int64_t(s.tokens.size()); ++pos)
        w.push_back(s.block_table[size_t(pos / block_size_)]);
    return w;
  }
  void expect_disjoint(const StepPlan& a, const StepPlan& b) const {
    for (const auto& sa : a.seqs)
      for (const auto& sb : b.seqs) EXPECT_NE(sa.id, sb.id) << "a sequence in two steps in flight";
    for (const auto& [w, other] : {std::pair{&a, &b}, std::pair{&b, &a}})
      for (int32_t block : written(*w))
        for (const auto& s : other->seqs)
          EXPECT_EQ(std::count(s.block_table.begin(), s.block_table.end(), block), 0)
              << "block " << block << " written by one step in flight and used by another";
  }
  int32_t& slot(const StepSeq& s, int64_t pos) {
    const int32_t block = s.block_table[size_t(pos / block_size_)];
    return slots_[size_t(block) * size_t(block_size_) + size_t(pos % block_size_)];
  }

  std::vector<int32_t> slots_;
  int block_size_;
  int64_t vocab_;
  int depth_;
  std::vector<StepPlan> in_flight_;
  size_t max_in_flight_ = 0;
  std::unordered_map<int64_t, std::vector<int32_t>> history_;
  size_t max_seqs_ = 0;
  int64_t max_tokens_ = 0;
  int64_t steps_ = 0;
  std::vector<StepPlan> plans_;
};

}  // namespace qmpi::test
