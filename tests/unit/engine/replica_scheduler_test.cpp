// Data-parallel replicas behind one queue (ReplicaScheduler) against one FakeModel per replica:
// every request gets the tokens it gets alone, the work is spread by load, the choices of a
// request stay on one replica, ids lead back to their replica, and an idle replica hears from
// rank 0 (keep-alive steps); a lost replica's sequences come back once, marked lost, and
// started again elsewhere they end as they would have.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "engine/replica_scheduler.h"
#include "fake_model.h"

namespace qmpi {
namespace {

using test::FakeModel;

constexpr int kBlockSize = 4;

struct Replicas {
  Replicas(int n, int depth, int64_t blocks = 256) {
    for (int r = 0; r < n; ++r) {
      models.push_back(std::make_unique<FakeModel>(blocks, kBlockSize, 64, depth));
      tables.push_back(std::make_unique<BlockManager>(blocks, kBlockSize));
    }
  }
  std::vector<StepRunner*> runners() {
    std::vector<StepRunner*> out;
    for (auto& m : models) out.push_back(m.get());
    return out;
  }
  std::vector<BlockManager*> blocks() {
    std::vector<BlockManager*> out;
    for (auto& b : tables) out.push_back(b.get());
    return out;
  }
  std::vector<std::unique_ptr<FakeModel>> models;
  std::vector<std::unique_ptr<BlockManager>> tables;
};

SchedulerConfig config(bool prefix_caching = true) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 8;
  cfg.max_batched_tokens = 64;
  cfg.max_model_len = 512;
  cfg.prefix_caching = prefix_caching;
  return cfg;
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

using Tokens = std::map<size_t, std::vector<int32_t>>;

// Runs every spec to the end on `sched`, the tokens of each by spec index.
Tokens run_all(SequenceScheduler& sched, const std::vector<SequenceSpec>& specs) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[sched.add(specs[i])] = i;
  Tokens out;
  for (int steps = 0; !sched.idle(); ++steps) {
    if (steps > 100000) {
      ADD_FAILURE() << "no end";
      break;
    }
    for (const TokenEvent& ev : sched.step()) out[index.at(ev.seq)].push_back(ev.token);
  }
  sched.flush_finished();
  EXPECT_EQ(sched.kv_blocks_in_use(), 0);
  return out;
}

std::vector<SequenceSpec> mixed_specs(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<SequenceSpec> specs;
  for (int i = 0; i < n; ++i)
    specs.push_back(make_spec(rng, 3 + int(rng() % 40), 4 + int(rng() % 30), i % 2 ? 0.8f : 0));
  return specs;
}

TEST(ReplicaScheduler, EveryRequestGetsTheTokensOfASingleReplica) {
  const std::vector<SequenceSpec> specs = mixed_specs(40, 3);
  Replicas one(1, 1);
  Scheduler single(*one.models[0], *one.tables[0], config());
  const Tokens want = run_all(single, specs);
  for (int depth : {1, 3}) {
    Replicas three(3, depth);
    ReplicaScheduler sched(three.runners(), three.blocks(), config(), 0);
    EXPECT_EQ(run_all(sched, specs), want) << "depth " << depth;
    for (size_t r = 0; r < three.models.size(); ++r) {
      EXPECT_GT(three.models[r]->steps(), 0) << "replica " << r << " got no work";
      EXPECT_EQ(three.models[r]->live_histories(), 0u) << "replica " << r;
    }
    EXPECT_EQ(sched.stats().generated, single.stats().generated);
  }
}

TEST(ReplicaScheduler, TheLeastLoadedReplicaGetsTheNextSequence) {
  Replicas two(2, 1);
  ReplicaScheduler sched(two.runners(), two.blocks(), config(false), 0);
  std::mt19937 rng(1);
  const int64_t big = sched.add(make_spec(rng, 40, 100, 0));
  const int64_t small1 = sched.add(make_spec(rng, 5, 5, 0));
  const int64_t small2 = sched.add(make_spec(rng, 5, 5, 0));
  EXPECT_EQ(sched.replica_of(big), 0);
  EXPECT_EQ(sched.replica_of(small1), 1);
  EXPECT_EQ(sched.replica_of(small2), 1);  // 20 tokens of work there, 140 on replica 0
  EXPECT_EQ(sched.replica(1).num_waiting(), 2u);
  EXPECT_NE(sched.find(small2), nullptr);
  sched.finish(small2);  // routed to replica 1
  EXPECT_EQ(sched.find(small2), nullptr);
  EXPECT_EQ(sched.replica(1).num_waiting(), 1u);
  EXPECT_EQ(sched.num_waiting(), 2u);
}

TEST(ReplicaScheduler, ChoicesOfOneRequestStayOnOneReplica) {
  std::mt19937 rng(2);
  const SequenceSpec spec = make_spec(rng, 20, 8, 0.8f);  // 5 blocks of 4: a first block to share
  for (bool prefix_caching : {true, false}) {
    Replicas two(2, 1);
    ReplicaScheduler sched(two.runners(), two.blocks(), config(prefix_caching), 0);
    const int64_t a = sched.add(spec), b = sched.add(spec);
    if (prefix_caching)
      EXPECT_EQ(sched.replica_of(a), sched.replica_of(b));
    else
      EXPECT_NE(sched.replica_of(a), sched.replica_of(b));  // spread by load alone
  }
}

TEST(ReplicaScheduler, AnIdleReplicaGetsKeepAliveSteps) {
  Replicas two(2, 1);
  // Any time at all counts as long enough: every step pings the idle replica.
  ReplicaScheduler sched(two.runners(), two.blocks(), config(), 1e-12);
  std::mt19937 rng(4);
  const int64_t id = sched.add(make_spec(rng, 6, 5, 0));
  ASSERT_EQ(sched.replica_of(id), 0);
  while (!sched.idle()) sched.step();
  EXPECT_GT(two.models[1]->steps(), 0);
  for (const StepPlan& p : two.models[1]->plans()) EXPECT_TRUE(p.seqs.empty());
}

// A replica whose mesh stops answering: collect() raises CommTimeout from its `fail_at`th step
// on, as rank 0's world comm does when a replica's rank is gone.
class FailingRunner final : public StepRunner {
 public:
  FailingRunner(StepRunner& inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
  StepResult run(const StepPlan& plan) override { return inner_.run(plan); }
  int depth() const override { return inner_.depth(); }
  void submit(const StepPlan& plan) override {
    EXPECT_FALSE(abandoned) << "a step for a lost replica";
    inner_.submit(plan);
  }
  StepResult collect() override {
    if (++collected_ >= fail_at_) raise(Err::CommTimeout, "rank 3 stopped answering");
    return inner_.collect();
  }
  void abandon() override { abandoned = true; }
  bool abandoned = false;

 private:
  StepRunner& inner_;
  int fail_at_;
  int collected_ = 0;
};

TEST(ReplicaScheduler, ALostReplicasSequencesComeBackOnceAndEndElsewhereAsBefore) {
  const std::vector<SequenceSpec> specs = mixed_specs(30, 5);
  Replicas one(1, 1);
  Scheduler single(*one.models[0], *one.tables[0], config());
  const Tokens want = run_all(single, specs);
  for (int depth : {1, 2}) {
    Replicas three(3, depth);
    FailingRunner failing(*three.models[1], 6);
    std::vector<StepRunner*> runners = three.runners();
    runners[1] = &failing;
    ReplicaScheduler sched(runners, three.blocks(), config(), 0);
    std::map<int64_t, size_t> index;
    for (size_t i = 0; i < specs.size(); ++i) index[sched.add(specs[i])] = i;
    Tokens got;
    size_t lost = 0;
    for (int steps = 0; !sched.idle() && steps < 100000; ++steps)
      for (const TokenEvent& ev : sched.step()) {
        const size_t i = index.at(ev.seq);
        if (!ev.lost) {
          got[i].push_back(ev.token);
          continue;
        }
        EXPECT_EQ(ev.lost->code(), Err::CommTimeout);
        EXPECT_NE(ev.lost->message().find("replica 1"), std::string::npos);
        ++lost;
        got[i].clear();  // what a batch job does: the request starts again
        const int64_t again = sched.add(specs[i]);
        EXPECT_NE(sched.replica_of(again), 1);
        index[again] = i;
      }
    sched.flush_finished();
    EXPECT_GT(lost, 0u) << "depth " << depth;
    EXPECT_TRUE(failing.abandoned);
    EXPECT_EQ(got, want) << "depth " << depth;
    EXPECT_EQ(sched.kv_blocks_in_use(), 0);
    const std::vector<ReplicaLoad> loads = sched.replica_loads();
    ASSERT_EQ(loads.size(), 3u);
    EXPECT_TRUE(loads[0].lost.empty());
    EXPECT_NE(loads[1].lost.find("rank 3"), std::string::npos);
    EXPECT_TRUE(loads[2].lost.empty());
  }
}

}  // namespace
}  // namespace qmpi
