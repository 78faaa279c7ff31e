// Speculative decoding in the scheduler, against FakeModel (fake_model.h), whose last stage is
// the real one: whatever the guesses, every request gets the tokens, logprobs and finish of a
// plain run (greedy and seeded sampling, stop ids, max_tokens, chunked prefill, preemption,
// pipelined steps, prefix-cache hits), and after every step the cache holds what a plain run
// holds at the same output length (computed tokens, blocks, published prefix-cache keys).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/draft_proposer.h"
#include "engine/scheduler.h"
#include "fake_model.h"

namespace qmpi {
namespace {

using test::FakeModel;
constexpr int64_t kVocab = 64;

// Guesses the fake model's own continuation (as the sampler will pick it), up to `max` tokens
// of it, each wrong with probability `wrong` (a deterministic function of where it is, so runs
// repeat): right guesses test acceptance, wrong ones rollback.
class Oracle final : public DraftProposer {
 public:
  explicit Oracle(double wrong) : model_(1, 1, kVocab), wrong_(wrong) {}
  std::vector<int32_t> propose(const Sequence& s, int64_t max) override {
    std::vector<int32_t> ctx = s.tokens(0, s.total()), out;
    std::mt19937 rng(uint32_t(s.id * 7919 + s.total()));
    const int64_t n = 1 + int64_t(rng() % uint32_t(max));
    for (int64_t j = 0; j < n; ++j) {
      std::vector<float> logits = model_.logits_for(ctx);
      int32_t tok =
          sample_token(logits, kVocab, s.spec.sampling, uint32_t(s.output.size() + size_t(j)), ctx)
              .token;
      if (double(rng() % 1000) < wrong_ * 1000) tok = (tok + 1) % int32_t(kVocab);
      out.push_back(tok);
      ctx.push_back(tok);
    }
    return out;
  }

 private:
  FakeModel model_;  // for logits_for only
  double wrong_;
};

struct Limits {
  int64_t blocks = 256;
  int block_size = 4;
  int64_t max_num_seqs = 8;
  int64_t max_batched_tokens = 64;
  bool prefix_caching = true;
  int depth = 1;
  int32_t k = 4;  // guesses per step; 0 = plain
  std::shared_ptr<DraftProposer> drafts;
};

Limits with_oracle(double wrong) {
  Limits s;
  s.drafts = std::make_shared<Oracle>(wrong);
  return s;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  FinishReason finish = FinishReason::None;
};

// One sequence's cache after a step, keyed by its output length.
struct CacheState {
  int64_t computed = 0;
  size_t blocks = 0;
  std::vector<uint64_t> hashes;
  bool operator==(const CacheState&) const = default;
};

struct Outcomes {
  std::vector<Outcome> out;
  SchedulerStats stats;
  std::vector<std::map<size_t, CacheState>> cache;  // per request
  std::vector<StepPlan> plans;
};

Outcomes run_all(const std::vector<SequenceSpec>& specs, const Limits& setup) {
  FakeModel model(setup.blocks, setup.block_size, kVocab, setup.depth);
  BlockManager blocks(setup.blocks, setup.block_size);
  SchedulerConfig cfg;
  cfg.max_num_seqs = setup.max_num_seqs;
  cfg.max_batched_tokens = setup.max_batched_tokens;
  cfg.prefix_caching = setup.prefix_caching;
  if (setup.k > 0)
    cfg.speculative = parse_speculative_config(
        R"({"method": "ngram", "num_speculative_tokens": )" + std::to_string(setup.k) +
        R"(, "prompt_lookup_min": 1, "prompt_lookup_max": 3})");
  Scheduler sched(model, blocks, cfg, setup.k > 0 ? setup.drafts : nullptr);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[sched.add(specs[i])] = i;
  Outcomes run;
  run.out.resize(specs.size());
  run.cache.resize(specs.size());
  for (int64_t steps = 0; !sched.idle(); ++steps) {
    if (steps > 100000) {
      ADD_FAILURE() << "no end after " << steps << " steps";
      break;
    }
    for (const TokenEvent& ev : sched.step()) {
      Outcome& o = run.out[index.at(ev.seq)];
      EXPECT_EQ(o.finish, FinishReason::None) << "a token after the sequence finished";
      o.tokens.push_back(ev.token);
      o.logprobs.push_back(ev.logprob);
      o.top.push_back(ev.top);
      o.finish = ev.finish;
    }
    for (const auto& [id, i] : index)
      if (const Sequence* s = sched.find(id); s && s->state == SeqState::Running && !s->in_flight)
        run.cache[i][s->output.size()] = {s->computed, s->blocks.size(), s->hashes};
  }
  sched.flush_finished();
  EXPECT_EQ(model.live_histories(), 0u);
  EXPECT_EQ(sched.pool().in_use(), 0) << "blocks still held after every sequence finished";
  run.stats = sched.stats();
  run.plans = model.plans();
  return run;
}

std::vector<SequenceSpec> mixed_specs(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < n; ++i) {
    SequenceSpec s;
    for (int j = 0, len = 3 + int(rng() % 40); j < len; ++j)
      s.prompt.push_back(int32_t(rng() % kVocab));
    s.max_tokens = 4 + int(rng() % 30);
    s.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    s.sampling.seed = rng();
    s.sampling.repetition_penalty = i % 3 ? 1.0f : 1.3f;  // guesses must join the history
    s.sampling.top_logprobs = i % 4 == 1 ? 3 : 0;
    s.stop_ids = {7};
    specs.push_back(s);
  }
  return specs;
}

void expect_same(const std::vector<Outcome>& got, const std::vector<Outcome>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i;
    ASSERT_EQ(got[i].top.size(), want[i].top.size()) << "request " << i;
    for (size_t t = 0; t < got[i].top.size(); ++t)
      for (size_t a = 0; a < want[i].top[t].size(); ++a) {
        EXPECT_EQ(got[i].top[t].at(a).token, want[i].top[t][a].token) << "request " << i;
        EXPECT_EQ(got[i].top[t].at(a).logprob, want[i].top[t][a].logprob) << "request " << i;
      }
    EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
    EXPECT_NE(got[i].finish, FinishReason::None) << "request " << i << " never finished";
  }
}

// Every state the speculative run passed through is one the plain run had at the same output
// length: rejected guesses left no computed token, block or prefix-cache key behind.
void expect_same_cache(const Outcomes& spec, const Outcomes& plain) {
  for (size_t i = 0; i < spec.cache.size(); ++i)
    for (const auto& [len, state] : spec.cache[i]) {
      const auto it = plain.cache[i].find(len);
      if (it == plain.cache[i].end()) continue;  // the plain run was in flight there
      EXPECT_EQ(state.computed, it->second.computed) << "request " << i << " at " << len;
      EXPECT_EQ(state.blocks, it->second.blocks) << "request " << i << " at " << len;
      EXPECT_EQ(state.hashes, it->second.hashes) << "request " << i << " at " << len;
    }
}

TEST(Speculation, GuessesRightAndWrongGiveThePlainOutputAndCache) {
  const auto specs = mixed_specs(24, 5);
  Limits plain_setup;
  plain_setup.k = 0;
  const Outcomes plain = run_all(specs, plain_setup);
  for (double wrong : {0.0, 0.3, 1.0}) {
    SCOPED_TRACE("wrong guesses: " + std::to_string(wrong));
    const Outcomes spec = run_all(specs, with_oracle(wrong));
    expect_same(spec.out, plain.out);
    expect_same_cache(spec, plain);
    EXPECT_GT(spec.stats.spec.draft_tokens, 50);
    if (wrong == 1.0) {
      EXPECT_EQ(spec.stats.spec.accepted_tokens, 0);
    }
    if (wrong == 0.0) {
      EXPECT_EQ(spec.stats.spec.accepted_tokens, spec.stats.spec.draft_tokens);
    }
    if (wrong == 0.3) {
      EXPECT_GT(spec.stats.spec.accepted_tokens, 0);
      EXPECT_LT(spec.stats.spec.accepted_tokens, spec.stats.spec.draft_tokens);
      EXPECT_LT(spec.stats.steps, plain.stats.steps) << "accepted guesses save steps";
    }
    EXPECT_EQ(spec.stats.generated, plain.stats.generated);
  }
}

// Every guess right: the step would give k + 1 tokens, but never more than max_tokens leaves
// (which also keeps it within max_model_len: add() refuses a prompt + max_tokens beyond it).
TEST(Speculation, NeverMoreTokensThanAsked) {
  SequenceSpec s;
  s.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  for (const int64_t max_tokens : {1, 2, 3, 5, 6, 11}) {
    s.max_tokens = max_tokens;
    const Outcomes spec = run_all({s}, with_oracle(0.0));
    EXPECT_EQ(int64_t(spec.out[0].tokens.size()), max_tokens);
    EXPECT_EQ(spec.out[0].finish, FinishReason::Length);
    if (max_tokens > 2) {
      EXPECT_GT(spec.stats.spec.accepted_tokens, 0);
    }
    // The last token is never fed back: the cache holds at most prompt + max_tokens - 1.
    for (const StepPlan& p : spec.plans)
      for (const StepSeq& q : p.seqs)
        EXPECT_LE(q.start_pos + int64_t(q.tokens.size()),
                  int64_t(s.prompt.size()) + max_tokens - 1);
  }
}

TEST(Speculation, TightCachesChunksAndPipelinesStillGiveThePlainOutput) {
  const auto specs = mixed_specs(20, 11);
  Limits plain_setup;
  plain_setup.k = 0;
  const Outcomes plain = run_all(specs, plain_setup);
  Limits s = with_oracle(0.3);
  s.blocks = 24;  // preemption
  s.max_num_seqs = 6;
  Outcomes spec = run_all(specs, s);
  expect_same(spec.out, plain.out);
  EXPECT_GT(spec.stats.preemptions, 0);
  s = with_oracle(0.3);
  s.max_batched_tokens = 9;  // chunked prefill beside guessing decodes
  spec = run_all(specs, s);
  expect_same(spec.out, plain.out);
  for (const StepPlan& p : spec.plans) {
    int64_t tokens = 0;
    for (const StepSeq& q : p.seqs) {
      tokens += int64_t(q.tokens.size());
      EXPECT_TRUE(q.draft == 0 || q.sample);
    }
    EXPECT_LE(tokens, 9);
  }
  s = with_oracle(0.3);
  s.depth = 3;  // pipelined micro-batches
  spec = run_all(specs, s);
  expect_same(spec.out, plain.out);
  expect_same_cache(spec, plain);
  EXPECT_GT(spec.stats.spec.accepted_tokens, 0);
}

// Prompt lookup on text that repeats itself: the real proposer, through the config.
TEST(Speculation, PromptLookupOnRepeatingPromptsGivesThePlainOutput) {
  std::vector<SequenceSpec> specs = mixed_specs(8, 13);
  for (auto& s : specs) {
    const auto once = s.prompt;
    for (int r = 0; r < 3; ++r) s.prompt.insert(s.prompt.end(), once.begin(), once.end());
  }
  Limits plain_setup;
  plain_setup.k = 0;
  const Outcomes plain = run_all(specs, plain_setup);
  Limits s;
  s.k = 3;
  const Outcomes spec = run_all(specs, s);
  expect_same(spec.out, plain.out);
  expect_same_cache(spec, plain);
  EXPECT_GT(spec.stats.spec.draft_tokens, 0);
}

TEST(PromptLookup, TakesTheLongestSuffixAndItsLatestOccurrence) {
  const std::vector<int32_t> ctx = {1, 2, 3, 9, 1, 2, 3, 8, 7, 5, 2, 3};
  // "2 3" occurs at 1 and 5: the latest is followed by 8 7 5.
  EXPECT_EQ(prompt_lookup(ctx, 1, 2, 3), (std::vector<int32_t>{8, 7, 5}));
  EXPECT_EQ(prompt_lookup(ctx, 1, 2, 10), (std::vector<int32_t>{8, 7, 5, 2, 3}));
  // "5 2 3" occurs nowhere earlier; min 3 finds nothing.
  EXPECT_TRUE(prompt_lookup(ctx, 3, 3, 3).empty());
  // A suffix that overlaps its own occurrence: 4 4 4 occurs at 0, followed by the last 4.
  EXPECT_EQ(prompt_lookup(std::vector<int32_t>{4, 4, 4, 4}, 1, 3, 2), (std::vector<int32_t>{4}));
  EXPECT_TRUE(prompt_lookup(std::vector<int32_t>{4}, 1, 3, 2).empty());
  EXPECT_TRUE(prompt_lookup(ctx, 1, 2, 0).empty());
}

}  // namespace
}  // namespace qmpi
