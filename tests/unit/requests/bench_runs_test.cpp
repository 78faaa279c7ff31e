// qmpi bench's timed requests (requests/bench_runs.h) over the real scheduler and FakeModel: the
// decode window counts gen_len - 1 tokens of every sequence and nothing of the prefill, also when
// the prompts need several steps and with pipeline stages; a shared prefix comes from the prefix
// cache; cancelled requests leave no block in use; the verify proposer puts its guesses on every
// decode step; a --max-model-len too short is refused by name.
#include <gtest/gtest.h>

#include "../engine/fake_model.h"
#include "../expect_error.h"
#include "requests/bench_runs.h"

namespace qmpi {
namespace {

constexpr int64_t kVocab = 64;

struct Rig {
  explicit Rig(int64_t budget = 256, int depth = 1, int32_t guesses = 0, int64_t max_len = 200)
      : fake(512, 4, kVocab, depth),
        blocks(512, 4),
        sched(fake, blocks, config(budget, max_len, guesses),
              guesses ? std::make_shared<RepeatLastToken>(guesses) : nullptr) {
    model.max_model_len = max_len;
    model.vocab_size = kVocab;
  }
  static SchedulerConfig config(int64_t budget, int64_t max_len, int32_t guesses) {
    SchedulerConfig c;
    c.max_num_seqs = 16;
    c.max_batched_tokens = budget;
    c.max_model_len = max_len;
    c.speculative.num_tokens = guesses;
    return c;
  }
  test::FakeModel fake;
  BlockManager blocks;
  Scheduler sched;
  ModelFacts model;
};

TEST(BenchRuns, TheWindowHoldsEverySequencesDecodeAndNoPrefill) {
  Rig r;
  BenchRunner runner(r.sched, r.model, kVocab, 1);
  const DecodeTiming t = runner.decode(4, {}, 8, 6);
  EXPECT_EQ(t.batch, 4);
  EXPECT_EQ(t.prompt_tokens, 8);
  EXPECT_EQ(t.tokens, 4 * 5);
  EXPECT_EQ(t.seq_steps, 4 * 5) << "one token per sequence per step";
  EXPECT_GT(t.decode_s, 0.0);
  EXPECT_GT(t.prefill_s, 0.0);
  EXPECT_EQ(t.preemptions, 0);
  EXPECT_TRUE(r.sched.idle()) << "the requests still running were cancelled";
  EXPECT_EQ(r.sched.pool().in_use(), 0) << "and their blocks given back";
  EXPECT_EQ(r.fake.live_histories(), 0u) << "the last stage forgot them";
}

TEST(BenchRuns, PromptsOverSeveralStepsStillOpenTheWindowOnceAllDecode) {
  Rig r(/*budget=*/10);
  BenchRunner runner(r.sched, r.model, kVocab, 2);
  const DecodeTiming t = runner.decode(6, {}, 8, 5);  // 48 prompt tokens, 10 per step
  EXPECT_EQ(t.tokens, 6 * 4);
  EXPECT_EQ(t.seq_steps, 6 * 4);
  for (const StepPlan& p : r.fake.plans())
    for (const StepSeq& s : p.seqs) EXPECT_LE(int64_t(s.tokens.size()), 10);
}

TEST(BenchRuns, PipelineStagesCountOneStepPerSequencePerRound) {
  Rig r(256, /*depth=*/2);
  BenchRunner runner(r.sched, r.model, kVocab, 3);
  const DecodeTiming t = runner.decode(4, {}, 8, 7);
  EXPECT_GE(r.fake.max_in_flight(), 2u);
  EXPECT_EQ(t.tokens, t.seq_steps);
  EXPECT_GE(t.tokens, 4 * 6);
  EXPECT_NEAR(t.step_s(), t.decode_s * 4.0 / double(t.seq_steps), 1e-12);
  EXPECT_TRUE(r.sched.idle());
}

TEST(BenchRuns, ASharedPrefixIsReadFromThePrefixCache) {
  Rig r;
  BenchRunner runner(r.sched, r.model, kVocab, 4);
  const std::vector<int32_t> prefix = runner.random_prompt(16);  // 4 whole blocks
  runner.time_to_first_token(prefix);
  const int64_t cached = r.sched.stats().cached_tokens;
  const DecodeTiming t = runner.decode(3, prefix, 8, 4);
  EXPECT_EQ(t.prompt_tokens, 24);
  EXPECT_EQ(r.sched.stats().cached_tokens - cached, 3 * 16);
  for (int32_t tok : runner.random_prompt(100)) {
    EXPECT_GE(tok, 0);
    EXPECT_LT(tok, kVocab);
  }
}

TEST(BenchRuns, VerifyStepsCarryTheGuessesOnEveryDecodeStep) {
  Rig r(256, 1, /*guesses=*/3);
  BenchRunner runner(r.sched, r.model, kVocab, 5);
  const DecodeTiming t = runner.decode(2, {}, 8, 6);
  EXPECT_GE(t.tokens, 2 * 5);
  int64_t decode_rows = 0, with_guesses = 0;
  for (const StepPlan& p : r.fake.plans())
    for (const StepSeq& s : p.seqs)
      if (!s.first_chunk && s.sample) {
        ++decode_rows;
        with_guesses += s.draft == 3;
      }
  EXPECT_GT(decode_rows, 0);
  // Only the last steps, with less room left before max_tokens, may carry fewer.
  EXPECT_GE(with_guesses, decode_rows - 4);
}

TEST(BenchRuns, AMaxModelLenTooShortIsRefusedByName) {
  Rig r(256, 1, 0, /*max_len=*/20);
  BenchRunner runner(r.sched, r.model, kVocab, 6);
  testing::expect_error([&] { runner.decode(1, {}, 16, 8); }, Err::Usage, {"--max-model-len 20"});
  EXPECT_TRUE(r.sched.idle());
}

TEST(BenchRuns, MaxTokensLeaveRoomForThePrefillSteps) {
  EXPECT_EQ(bench_max_tokens(1, 128, 64, 2048), 64 + 2 + 8);
  EXPECT_EQ(bench_max_tokens(64, 128, 64, 2048), 64 + 2 * 4 + 8);
}

}  // namespace
}  // namespace qmpi
