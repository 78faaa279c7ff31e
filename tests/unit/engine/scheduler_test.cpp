// The continuous-batching scheduler against FakeModel (fake_model.h): every request finishes
// with the tokens it gets when it runs alone, through preemption, chunked prefill, prefix-cache
// hits and tight caches, and the step limits hold.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/errors.h"
#include "engine/scheduler.h"
#include "fake_model.h"

namespace qmpi {
namespace {

using test::FakeModel;

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::None;
};

struct Limits {
  int64_t blocks = 256;
  int block_size = 4;
  int64_t max_num_seqs = 8;
  int64_t max_batched_tokens = 64;
  int64_t max_model_len = 512;
  bool prefix_caching = true;
  int depth = 1;  // steps the fake pipeline keeps in flight
};

// Runs every spec to the end (failing the test after `step_limit` steps: a deadlock).
std::vector<Outcome> run_all(const std::vector<SequenceSpec>& specs, const Limits& setup,
                             SchedulerStats* stats = nullptr, FakeModel* model_out = nullptr,
                             int64_t step_limit = 100000) {
  FakeModel local(setup.blocks, setup.block_size, 64, setup.depth);
  FakeModel& model = model_out ? *model_out : local;
  BlockManager blocks(setup.blocks, setup.block_size);
  SchedulerConfig cfg;
  cfg.max_num_seqs = setup.max_num_seqs;
  cfg.max_batched_tokens = setup.max_batched_tokens;
  cfg.max_model_len = setup.max_model_len;
  cfg.prefix_caching = setup.prefix_caching;
  Scheduler sched(model, blocks, cfg);
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[sched.add(specs[i])] = i;
  std::vector<Outcome> out(specs.size());
  int64_t steps = 0;
  while (!sched.idle()) {
    if (++steps > step_limit) {
      ADD_FAILURE() << "no end after " << step_limit << " steps: " << sched.num_running()
                    << " running, " << sched.num_waiting() << " waiting";
      break;
    }
    EXPECT_LE(int64_t(sched.num_running()), setup.max_num_seqs);
    for (const TokenEvent& ev : sched.step()) {
      Outcome& o = out[index.at(ev.seq)];
      EXPECT_EQ(o.finish, FinishReason::None) << "a token after the sequence finished";
      o.tokens.push_back(ev.token);
      o.logprobs.push_back(ev.logprob);
      o.finish = ev.finish;
    }
  }
  sched.flush_finished();
  EXPECT_EQ(model.live_histories(), 0u) << "the last stage was not told every sequence ended";
  EXPECT_EQ(sched.pool().in_use(), 0) << "blocks still held after every sequence finished";
  if (stats) *stats = sched.stats();
  return out;
}

// Each request alone, with room for everything: the reference.
std::vector<Outcome> run_alone(const std::vector<SequenceSpec>& specs) {
  std::vector<Outcome> out;
  Limits roomy;
  roomy.blocks = 1024;
  roomy.max_batched_tokens = 4096;
  roomy.prefix_caching = false;
  for (const auto& s : specs) out.push_back(run_all({s}, roomy).front());
  return out;
}

SequenceSpec make_spec(std::mt19937& rng, int prompt_len, int max_tokens, float temperature) {
  SequenceSpec s;
  std::uniform_int_distribution<int32_t> tok(0, 63);
  for (int i = 0; i < prompt_len; ++i) s.prompt.push_back(tok(rng));
  s.max_tokens = max_tokens;
  s.sampling.temperature = temperature;
  s.sampling.seed = rng();
  s.stop_ids = {7};
  return s;
}

// Greedy, with no stop id: runs to max_tokens.
SequenceSpec run_to_length(std::mt19937& rng, int prompt_len, int max_tokens) {
  SequenceSpec s = make_spec(rng, prompt_len, max_tokens, 0.0f);
  s.stop_ids.clear();
  return s;
}

std::vector<SequenceSpec> mixed_specs(int n, float temperature, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < n; ++i)
    specs.push_back(make_spec(rng, 3 + int(rng() % 40), 4 + int(rng() % 30), temperature));
  return specs;
}

void expect_same(const std::vector<Outcome>& got, const std::vector<Outcome>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
    EXPECT_NE(got[i].finish, FinishReason::None) << "request " << i << " never finished";
  }
}

TEST(Scheduler, PreemptionStillGivesEveryRequestItsAloneOutput) {
  const auto specs = mixed_specs(24, 0.0f, 1);
  Limits tight;
  tight.blocks = 24;  // 96 tokens for 8 running sequences of up to 72: preemption is certain
  SchedulerStats stats;
  const auto got = run_all(specs, tight, &stats);
  expect_same(got, run_alone(specs));
  EXPECT_GT(stats.preemptions, 0) << "the test did not exercise preemption";
}

TEST(Scheduler, SeededSamplingDoesNotDependOnTheBatch) {
  const auto specs = mixed_specs(20, 0.9f, 2);
  for (auto s : {Limits{}, Limits{24, 4, 8, 64, 512, true}, Limits{40, 8, 3, 5, 512, false}}) {
    SchedulerStats stats;
    expect_same(run_all(specs, s, &stats), run_alone(specs));
  }
}

TEST(Scheduler, LongPromptIsChunkedAndDecodesKeepGoing) {
  std::mt19937 rng(3);
  SequenceSpec decoder = run_to_length(rng, 4, 40);
  SequenceSpec longp = make_spec(rng, 150, 3, 0.0f);
  Limits s;
  s.max_batched_tokens = 16;
  FakeModel model(s.blocks, s.block_size);
  const auto got = run_all({decoder, longp}, s, nullptr, &model);
  expect_same(got, run_alone({decoder, longp}));
  EXPECT_LE(model.max_tokens(), 16);
  // While the long prompt is being prefilled (chunks of it in the step), the short sequence
  // still decodes in every one of those steps.
  int chunks = 0;
  for (const auto& plan : model.plans()) {
    bool has_chunk = false, has_decode = false;
    for (const auto& q : plan.seqs) {
      if (q.tokens.size() > 1 && !q.first_chunk) has_chunk = true;
      if (q.tokens.size() == 1 && q.sample && q.start_pos >= 4) has_decode = true;
    }
    if (has_chunk) {
      ++chunks;
      EXPECT_TRUE(has_decode) << "a prompt chunk held the decoding sequence back";
    }
  }
  EXPECT_GE(chunks, 8) << "150 prompt tokens at 16 per step should take many chunks";
}

TEST(Scheduler, ChunkBoundariesDoNotChangeResults) {
  const auto specs = mixed_specs(6, 0.0f, 4);
  const auto want = run_alone(specs);
  for (int64_t budget : {1, 3, 7, 16}) {
    Limits s;
    s.max_batched_tokens = budget;
    s.prefix_caching = false;
    expect_same(run_all(specs, s), want);
  }
}

TEST(Scheduler, MaxNumSeqsIsRespected) {
  const auto specs = mixed_specs(30, 0.0f, 5);
  Limits s;
  s.max_num_seqs = 5;
  FakeModel model(s.blocks, s.block_size);
  SchedulerStats stats;
  expect_same(run_all(specs, s, &stats, &model), run_alone(specs));
  EXPECT_LE(model.max_seqs(), 5u);
  EXPECT_EQ(stats.peak_running, 5) << "the scheduler should fill the batch";
}

TEST(Scheduler, CacheThatFitsExactlyOneRequestDoesNotDeadlock) {
  std::mt19937 rng(6);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < 6; ++i) {
    SequenceSpec s = run_to_length(rng, 21, 12);
    specs.push_back(s);
  }
  Limits s;
  s.block_size = 4;
  s.blocks = (21 + 12 - 1 + 3) / 4;  // exactly one request's worth
  SchedulerStats stats;
  const auto got = run_all(specs, s, &stats, nullptr, 5000);
  expect_same(got, run_alone(specs));
  for (const auto& o : got) EXPECT_EQ(o.tokens.size(), 12u);
}

TEST(Scheduler, RequestLargerThanTheWholeCacheIsRefused) {
  FakeModel model(8, 4);
  BlockManager blocks(8, 4);
  SchedulerConfig cfg;
  Scheduler sched(model, blocks, cfg);
  SequenceSpec s;
  s.prompt.assign(30, 1);
  s.max_tokens = 3;  // 32 tokens in the cache = 8 blocks: fits
  EXPECT_NO_THROW(sched.add(s));
  s.max_tokens = 4;  // 33: one block too many
  try {
    sched.add(s);
    FAIL() << "accepted a request larger than the cache";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::PromptTooLong);
    EXPECT_NE(e.message().find("9 KV blocks"), std::string::npos) << e.message();
  }
  s.max_tokens = 0;
  EXPECT_THROW(sched.add(s), Error);
  cfg.max_model_len = 32;
  Scheduler short_len(model, blocks, cfg);
  s.max_tokens = 3;
  EXPECT_THROW(short_len.add(s), Error);  // 30 + 3 > 32
}

TEST(Scheduler, PrefixCacheHitsGiveTheSameResultsAsMisses) {
  std::mt19937 rng(7);
  const SequenceSpec base = make_spec(rng, 37, 1, 0.0f);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < 12; ++i) {
    SequenceSpec s = make_spec(rng, 2 + int(rng() % 9), 5 + i, i % 2 ? 0.7f : 0.0f);
    s.prompt.insert(s.prompt.begin(), base.prompt.begin(), base.prompt.end());
    s.sampling.repetition_penalty = i % 3 ? 1.0f : 1.3f;  // the history must include the prefix
    specs.push_back(s);
  }
  specs.push_back(specs[0]);  // a whole prompt seen before: all but its last block hit
  const auto want = run_alone(specs);
  Limits s;
  s.max_num_seqs = 3;
  SchedulerStats stats;
  expect_same(run_all(specs, s, &stats), want);
  EXPECT_GE(stats.cached_tokens, 10 * 36) << "the common 37-token prefix should hit 9 blocks";
  // Hits also survive a tight cache with preemption.
  s.blocks = 20;
  s.max_num_seqs = 6;
  expect_same(run_all(specs, s, &stats), want);
  // And a pipeline of 3 stages, where the prefix is computed by one step in flight while others
  // wait to share it.
  s.blocks = 256;
  s.depth = 3;
  expect_same(run_all(specs, s, &stats), want);
  EXPECT_GE(stats.cached_tokens, 10 * 36) << "pipelined steps should share the prefix too";
}

TEST(Scheduler, ChoicesOfOneRequestShareTheirPromptBlocks) {
  std::mt19937 rng(12);
  SequenceSpec s = make_spec(rng, 41, 6, 0.8f);
  std::vector<SequenceSpec> specs;
  for (uint32_t c = 0; c < 4; ++c) {  // as a request with n = 4 comes in
    specs.push_back(s);
    specs.back().sampling.seed = choice_seed(s.sampling.seed, c);
  }
  SchedulerStats stats;
  expect_same(run_all(specs, Limits{}, &stats), run_alone(specs));
  EXPECT_EQ(stats.cached_tokens, 3 * 40) << "the last three reuse the first one's 10 blocks";
}

TEST(Scheduler, MaxModelLenEndsWithLength) {
  std::mt19937 rng(8);
  SequenceSpec s = run_to_length(rng, 10, 6);
  Limits setup;
  setup.max_model_len = 16;
  const auto got = run_all({s}, setup);
  EXPECT_EQ(got[0].tokens.size(), 6u);
  EXPECT_EQ(got[0].finish, FinishReason::Length);
}

TEST(Scheduler, StopIdEndsTheSequence) {
  std::mt19937 rng(9);
  SequenceSpec s = run_to_length(rng, 5, 200);
  Limits setup;
  const auto free_run = run_all({s}, setup);
  ASSERT_EQ(free_run[0].tokens.size(), 200u);
  s.stop_ids = {free_run[0].tokens[5]};
  const auto stopped = run_all({s}, setup);
  const auto first =
      std::find(free_run[0].tokens.begin(), free_run[0].tokens.end(), free_run[0].tokens[5]) -
      free_run[0].tokens.begin();
  EXPECT_EQ(int64_t(stopped[0].tokens.size()), first + 1);
  EXPECT_EQ(stopped[0].finish, FinishReason::Stop);
}

TEST(Scheduler, FinishingRunningAndWaitingSequencesFreesEverything) {
  FakeModel model(64, 4);
  BlockManager blocks(64, 4);
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  Scheduler sched(model, blocks, cfg);
  std::mt19937 rng(10);
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    SequenceSpec s = run_to_length(rng, 9, 50);
    ids.push_back(sched.add(s));
  }
  sched.step();
  sched.step();
  EXPECT_EQ(sched.num_running(), 2u);
  sched.finish(ids[0]);  // e.g. a stop string matched
  EXPECT_EQ(sched.find(ids[0]), nullptr);
  for (size_t i = 2; i < ids.size(); ++i) {  // a draining job drops the ones not started
    ASSERT_NE(sched.find(ids[i]), nullptr);
    EXPECT_EQ(sched.find(ids[i])->state, SeqState::Waiting);
    sched.finish(ids[i]);
  }
  EXPECT_EQ(sched.num_waiting(), 0u);
  EXPECT_EQ(sched.num_running(), 1u);
  while (!sched.idle()) sched.step();
  sched.flush_finished();
  EXPECT_EQ(sched.pool().in_use(), 0);
  EXPECT_EQ(model.live_histories(), 0u);
}

// PP stages: up to `depth` steps in flight at once, which the fake checks share no sequence and
// no block one of them writes; every request still gets its alone output through preemption,
// chunked prefill and prefix-cache hits, and the pipeline is kept full.
TEST(Scheduler, PipelinedStepsGiveEveryRequestItsAloneOutput) {
  for (float temperature : {0.0f, 0.9f}) {
    const auto specs = mixed_specs(24, temperature, 13);
    const auto want = run_alone(specs);
    for (int depth : {2, 3, 4}) {
      const Limits cases[] = {Limits{}, Limits{24, 4, 8, 64, 512, true},
                              Limits{40, 8, 3, 5, 512, false}, Limits{256, 4, 16, 16, 512, true}};
      for (Limits s : cases) {
        s.depth = depth;
        FakeModel model(s.blocks, s.block_size, 64, depth);
        SchedulerStats stats;
        expect_same(run_all(specs, s, &stats, &model), want);
        const auto full = size_t(std::min<int64_t>(depth, s.max_num_seqs));
        if (s.blocks == 24) {  // a cache this short cannot always feed every stage
          EXPECT_GE(model.max_in_flight(), 2u) << "depth " << depth;
          EXPECT_GT(stats.preemptions, 0) << "no preemption exercised";
        } else {
          EXPECT_EQ(model.max_in_flight(), full)
              << "depth " << depth << ", max_num_seqs " << s.max_num_seqs << ", budget "
              << s.max_batched_tokens;
        }
      }
    }
  }
}

TEST(Scheduler, PipelinedStepsSplitTheRunningSequences) {
  std::mt19937 rng(14);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < 12; ++i) {
    specs.push_back(run_to_length(rng, 5, 30));
  }
  Limits s;
  s.max_num_seqs = 12;
  s.depth = 3;
  FakeModel model(s.blocks, s.block_size, 64, 3);
  expect_same(run_all(specs, s, nullptr, &model), run_alone(specs));
  EXPECT_EQ(model.max_seqs(), 4u) << "12 sequences over 3 stages: 4 per micro-batch";
  // Every decode step carries its share, not one full batch and two empty ones.
  size_t decode_steps = 0;
  for (const auto& plan : model.plans())
    if (!plan.seqs.empty() && plan.seqs.front().start_pos > 5 && plan.seqs.size() == 4)
      ++decode_steps;
  EXPECT_GE(decode_steps, 3u * 25) << "most decode micro-batches should hold 4 sequences";
}

TEST(Scheduler, MicroBatchesLimitTheStepsInFlight) {
  const auto specs = mixed_specs(12, 0.0f, 16);
  for (int64_t limit : {1, 2}) {
    FakeModel model(256, 4, 64, 3);
    BlockManager blocks(256, 4);
    SchedulerConfig cfg;
    cfg.micro_batches = limit;
    Scheduler sched(model, blocks, cfg);
    for (const auto& s : specs) sched.add(s);
    while (!sched.idle()) sched.step();
    EXPECT_EQ(model.max_in_flight(), size_t(limit)) << "--micro-batches " << limit;
  }
}

TEST(Scheduler, FinishingASequenceInFlightDropsItsLastToken) {
  FakeModel model(64, 4, 64, 2);
  BlockManager blocks(64, 4);
  Scheduler sched(model, blocks, SchedulerConfig{});
  std::mt19937 rng(15);
  std::vector<int64_t> ids;
  for (int i = 0; i < 2; ++i) {
    SequenceSpec s = run_to_length(rng, 6, 40);
    ids.push_back(sched.add(s));
  }
  sched.step();  // both in flight, one completed
  ASSERT_EQ(sched.in_flight(), 1u);
  const Sequence* pending = sched.find(ids[1]);
  ASSERT_NE(pending, nullptr);
  ASSERT_TRUE(pending->in_flight);
  sched.finish(ids[1]);  // e.g. its client went away
  int after = 0;
  while (!sched.idle())
    for (const auto& ev : sched.step()) after += ev.seq == ids[1] ? 1 : 0;
  EXPECT_EQ(after, 0) << "a finished sequence still produced tokens";
  EXPECT_EQ(sched.find(ids[1]), nullptr);
  sched.flush_finished();
  EXPECT_EQ(sched.pool().in_use(), 0);
  EXPECT_EQ(model.live_histories(), 0u);
}

TEST(Scheduler, TopLogprobsComeWithEachToken) {
  FakeModel model(64, 4);
  BlockManager blocks(64, 4);
  Scheduler sched(model, blocks, SchedulerConfig{});
  std::mt19937 rng(11);
  SequenceSpec s = run_to_length(rng, 6, 4);
  s.sampling.top_logprobs = 3;
  sched.add(s);
  int n = 0;
  while (!sched.idle())
    for (const auto& ev : sched.step()) {
      ++n;
      ASSERT_EQ(ev.top.size(), 3u);
      EXPECT_EQ(ev.top[0].token, ev.token) << "greedy picks the most likely token";
      EXPECT_FLOAT_EQ(ev.top[0].logprob, ev.logprob);
      EXPECT_GE(ev.top[0].logprob, ev.top[1].logprob);
      EXPECT_GE(ev.top[1].logprob, ev.top[2].logprob);
    }
  EXPECT_EQ(n, 4);
}

}  // namespace
}  // namespace qmpi
