// The logits-mask seam (engine/token_constraint.h) through the scheduler and FakeModel: a toy
// constraint's mask travels in StepSeq::allowed, the sampler keeps to it, and its state follows
// the output through continuous batching, preemption, pipelining and n > 1.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/scheduler.h"
#include "fake_model.h"

namespace qmpi {
namespace {

constexpr int64_t kVocab = 64;
constexpr int32_t kStop = 7;

// Outputs alternate odd and even ids, starting odd; the stop id may come only after four tokens.
class Alternating final : public TokenConstraint {
  class State final : public ConstraintState {
   public:
    std::vector<uint64_t> allowed() override {
      std::vector<uint64_t> bits(1, 0);
      for (int32_t id = 0; id < kVocab; ++id)
        if (id != kStop && id % 2 == (n_ % 2 == 0 ? 1 : 0)) bits[0] |= uint64_t(1) << id;
      if (n_ >= 4) bits[0] |= uint64_t(1) << kStop;
      return bits;
    }
    void advance(int32_t) override { ++n_; }

   private:
    int n_ = 0;
  };

 public:
  std::unique_ptr<ConstraintState> start() const override { return std::make_unique<State>(); }
};

struct Outputs {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> finish;
};

Outputs run(const std::vector<SequenceSpec>& specs, int64_t blocks, int depth) {
  test::FakeModel model(blocks, 4, kVocab, depth);
  BlockManager bm(blocks, 4);
  SchedulerConfig cfg;
  cfg.max_num_seqs = 8;
  cfg.max_batched_tokens = 64;
  cfg.max_model_len = 512;
  cfg.prefix_caching = true;
  Scheduler sched(model, bm, cfg);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[sched.add(specs[i])] = i;
  Outputs r;
  r.tokens.resize(specs.size());
  r.finish.resize(specs.size(), FinishReason::None);
  for (int steps = 0; !sched.idle() && steps < 100000; ++steps)
    for (const TokenEvent& ev : sched.step()) {
      r.tokens[index.at(ev.seq)].push_back(ev.token);
      r.finish[index.at(ev.seq)] = ev.finish;
    }
  EXPECT_TRUE(sched.idle());
  return r;
}

TEST(ConstrainedScheduler, MaskHoldsThroughBatchingPreemptionAndPipelining) {
  std::mt19937 rng(5);
  const auto constraint = std::make_shared<Alternating>();
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < 24; ++i) {
    SequenceSpec s;
    for (int j = 0; j < 5 + int(rng() % 30); ++j) s.prompt.push_back(int32_t(rng() % kVocab));
    if (i % 4 == 0) s.prompt = specs.empty() ? s.prompt : specs[0].prompt;  // shared prefixes
    s.max_tokens = 6 + int(rng() % 30);
    s.sampling.temperature = 1.0f;
    s.sampling.seed = rng();
    s.stop_ids = {kStop};
    if (i % 3 != 2) s.constraint = constraint;  // mixed with free sequences
    specs.push_back(s);
  }
  const Outputs roomy = run(specs, 1024, 1);
  int stopped = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].constraint) continue;
    const auto& t = roomy.tokens[i];
    for (size_t k = 0; k < t.size(); ++k) {
      if (t[k] == kStop) {
        EXPECT_GE(k, 4u) << "request " << i << " stopped before the constraint allowed it";
        EXPECT_EQ(k + 1, t.size());
        EXPECT_EQ(roomy.finish[i], FinishReason::Stop);
        ++stopped;
      } else {
        EXPECT_EQ(t[k] % 2, k % 2 == 0 ? 1 : 0) << "request " << i << " token " << k;
      }
    }
  }
  EXPECT_GT(stopped, 0) << "no constrained sequence reached its stop id";
  // The same outputs with preemption (a tight cache) and two steps in flight.
  for (auto [blocks, depth] : {std::pair<int64_t, int>{24, 1}, {1024, 2}, {40, 2}}) {
    const Outputs other = run(specs, blocks, depth);
    EXPECT_EQ(other.tokens, roomy.tokens) << blocks << " blocks, depth " << depth;
  }
}

}  // namespace
}  // namespace qmpi
