// Layout verdicts, recommendations and pre-flight errors on real Qwen configs, including the
// two cases people meet with Qwen2.5-72B on six GPUs.
#include <gtest/gtest.h>

#include <fstream>

#include "core/byte_size.h"
#include "engine/kv_sizing.h"
#include "plan/param_counts.h"
#include "plan/planner.h"

namespace qmpi {
namespace {

std::string fixture_path(const std::string& name) {
  return std::string(QMPI_SOURCE_DIR) + "/tests/fixtures/configs/" + name + ".json";
}
ModelConfig fixture(const std::string& name) {
  return ModelConfig::load(fixture_path(name));
}

PlanInputs gpus(int n, const std::string& mem, int64_t max_model_len = 32768) {
  PlanInputs in;
  in.gpus = n;
  in.gpu_mem = parse_byte_size(mem, "--gpu-mem");
  in.max_model_len = max_model_len;
  return in;
}

// The CPU backend, whose KV cache holds --max-num-seqs sequences from the start, with the
// memory of `n` GPUs of `mem` in one host.
PlanInputs cpu_ranks(int n, const std::string& mem, int64_t max_model_len = 32768) {
  PlanInputs in = gpus(n, mem, max_model_len);
  in.backend = BackendKind::Cpu;
  in.host_mem = uint64_t(n) * uint64_t(double(in.gpu_mem) * in.gpu_util);
  return in;
}

const LayoutVerdict& find(const PlanResult& r, int tp, int pp) {
  for (const auto& v : r.layouts)
    if (v.layout.tp == tp && v.layout.pp == pp) return v;
  throw std::runtime_error("no layout tp " + std::to_string(tp) + " pp " + std::to_string(pp));
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Planner, EnumeratesEveryLayoutUpToTheGpuCount) {
  const PlanResult r = plan_layouts(fixture("qwen2.5-7b-instruct"), gpus(6, "80GB"));
  // tp 1: pp 1..6, tp 2: 1..3, tp 3: 1..2, tp 4..6: 1; then the replicas of all 6 GPUs:
  // dp 2 x (1x3, 3x1), dp 3 x (1x2, 2x1), dp 6 x 1x1.
  EXPECT_EQ(r.layouts.size(), 19u);
  for (const auto& v : r.layouts) {
    EXPECT_LE(v.gpus(), 6);
    if (v.layout.dp > 1) {
      EXPECT_EQ(v.gpus(), 6) << layout_flags(v.layout);
    }
  }
}

TEST(Planner, VerdictsFollowHeadsAndLayers) {
  struct Case {
    const char* model;
    int tp, pp;
    bool valid;
    Err code;
  };
  const Case cases[] = {
      {"qwen2.5-0.5b-instruct", 2, 3, true, Err::Internal},
      {"qwen2.5-0.5b-instruct", 4, 1, true, Err::Internal},  // 4,4,3,3 heads over 2 KV heads
      {"qwen2.5-0.5b-instruct", 15, 1, false, Err::TpExceedsHeads},  // 14 heads
      {"qwen2.5-0.5b-instruct", 1, 25, false, Err::PipelineLayers},  // 24 layers
      {"qwen2.5-1.5b-instruct", 2, 1, true, Err::Internal},
      {"qwen2.5-7b-instruct", 4, 1, true, Err::Internal},
      {"qwen2.5-7b-instruct", 3, 2, true, Err::Internal},  // 4 KV heads, 18944 MLP columns
      {"qwen2.5-14b-instruct", 8, 1, true, Err::Internal},
      {"qwen2.5-32b-instruct", 8, 1, true, Err::Internal},
      {"qwen2.5-72b-instruct", 8, 1, true, Err::Internal},
      {"qwen2.5-72b-instruct", 6, 1, true, Err::Internal},  // 8 KV heads
      {"qwen2.5-72b-instruct", 3, 2, true, Err::Internal},
      {"qwen2.5-72b-instruct", 1, 81, false, Err::PipelineLayers},  // 80 layers
  };
  for (const auto& c : cases) {
    PlanInputs in = gpus(c.tp * c.pp, "80GB");
    const LayoutVerdict v = evaluate_layout(fixture(c.model), {c.tp, c.pp, {}}, in);
    EXPECT_EQ(v.valid, c.valid) << c.model << " tp " << c.tp << " pp " << c.pp << ": " << v.reason;
    if (!c.valid) {
      EXPECT_EQ(v.code, c.code) << c.model << " tp " << c.tp;
      EXPECT_FALSE(v.reason.empty());
      EXPECT_FALSE(v.fix.empty());
    }
  }
  // An intermediate size no TP of 5 divides (a synthetic shape) splits unevenly.
  nlohmann::json raw = fixture("qwen2.5-7b-instruct").raw;
  raw["num_attention_heads"] = 20;
  raw["num_key_value_heads"] = 5;
  raw["hidden_size"] = 2560;
  raw["intermediate_size"] = 6912;
  const LayoutVerdict v =
      evaluate_layout(ModelConfig::from_json(raw, "synthetic"), {5, 1, {}}, gpus(5, "80GB"));
  EXPECT_TRUE(v.valid) << v.reason;
}

// TP 6 on 64 query / 8 KV heads: the per-rank bytes count each shared KV head on both ranks
// that hold it, in the k/v projections and in the KV cache.
TEST(Planner, UnevenTpCountsSharedKvHeadsOnEveryRankThatHoldsThem) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  PlanInputs in = gpus(6, "80GB");
  in.kv_dtype = DType::BF16;
  const LayoutVerdict v = evaluate_layout(cfg, {6, 1, {}}, in);
  ASSERT_TRUE(v.valid) << v.reason;
  EXPECT_TRUE(v.fits);
  EXPECT_EQ(v.kv_head_copies, 13);
  const std::vector<int64_t> kv_heads{2, 2, 3, 2, 2, 2};
  for (int r = 0; r < 6; ++r) {
    const RankMemory& m = v.ranks[size_t(r)];
    EXPECT_EQ(m.kv_heads, kv_heads[size_t(r)]) << r;
    EXPECT_EQ(m.kv_per_token, 2ull * 80 * uint64_t(kv_heads[size_t(r)]) * 128 * 2) << r;
  }
  // Rank 2 holds 11 query heads and 3 KV heads: its q/o and k/v rows in every layer, bf16.
  const uint64_t h = 8192, d = 128;
  const uint64_t rank2_attention = 80 * 2 * (2 * 11 * d * h + 11 * d + 2 * 3 * d * h + 2 * 3 * d);
  const uint64_t rank4_attention = 80 * 2 * (2 * 10 * d * h + 10 * d + 2 * 2 * d * h + 2 * 2 * d);
  EXPECT_EQ(v.ranks[2].weights - v.ranks[4].weights, rank2_attention - rank4_attention);
  EXPECT_EQ(v.tightest, 2);
  // Ring all-reduce: 161 of them per token (2 per layer + the embedding), 5/6 of 32 KiB twice.
  EXPECT_EQ(v.tp_bytes_per_token, 161ull * 2 * 5 * 8192 * 4 / 6);
  EXPECT_EQ(evaluate_layout(cfg, {1, 6, {}}, in).tp_bytes_per_token, 0u);
}

TEST(Planner, Qwen72BOnSix24GBGpusFitsOnlyAsInt4) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  PlanInputs in = gpus(6, "24GiB");
  in.kv_dtype = DType::BF16;
  in.model_arg = "--model /models/Qwen2.5-72B-Instruct";
  const PlanResult r = plan_layouts(cfg, in);
  EXPECT_EQ(r.best, -1);
  EXPECT_EQ(r.failure, Err::WeightsDoNotFit);
  for (const auto& v : r.layouts) {
    EXPECT_FALSE(v.fits);
    if (v.valid) {
      EXPECT_EQ(v.memory_code, Err::WeightsDoNotFit);
    }
  }
  // Even the lightest layout holds more than 21.6 GiB of weights on its biggest rank.
  EXPECT_GT(find(r, 2, 3).biggest_rank().weights, rank_budget(in, 6) * 95 / 100);
  EXPECT_TRUE(contains(r.recommendation, "Nothing fits on 6 GPUs")) << r.recommendation;
  ASSERT_GE(r.suggestions.size(), 2u);
  EXPECT_TRUE(contains(r.suggestions[0].sentence, "int4 AWQ/GPTQ checkpoint (about 41.46 GB"))
      << r.suggestions[0].sentence;
  EXPECT_TRUE(contains(r.suggestions[0].sentence, "would fit as --tp 2 --pp 3"))
      << r.suggestions[0].sentence;
  EXPECT_TRUE(contains(r.suggestions.back().sentence, "More GPUs"))
      << r.suggestions.back().sentence;
  EXPECT_TRUE(contains(r.suggestions.back().command, "mpirun -np "));
}

TEST(Planner, Qwen72BOnSix80GBGpusRecommendsTp2Pp3) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  PlanInputs in = gpus(6, "80GB");
  in.kv_dtype = DType::BF16;
  in.model_arg = "--model /models/Qwen2.5-72B-Instruct";
  const PlanResult r = plan_layouts(cfg, in);

  // TP 6 runs and fits, but its rank 2 holds 3 of the 8 KV heads for all 80 layers.
  const LayoutVerdict& tp6 = find(r, 6, 1);
  EXPECT_TRUE(tp6.valid) << tp6.reason;
  EXPECT_TRUE(tp6.fits);
  EXPECT_LT(tp6.kv_room_tokens * 2, find(r, 2, 3).kv_room_tokens);

  ASSERT_GE(r.best, 0);
  const LayoutVerdict& best = r.layouts[size_t(r.best)];
  EXPECT_EQ(best.layout.tp, 2);
  EXPECT_EQ(best.layout.pp, 3);
  EXPECT_EQ(r.command,
            "mpirun -np 6 qmpi serve --model /models/Qwen2.5-72B-Instruct --tp 2 --pp 3 "
            "--backend cuda --max-model-len 32768");
  // Its biggest rank is a first-stage rank (27 layers and half the embedding).
  const RankMemory& m = best.biggest_rank();
  EXPECT_EQ(m.stage, 0);
  EXPECT_EQ(m.layers.size(), 27);
  EXPECT_EQ(m.kv_cache, 2ull * 27 * 4 * 128 * 2 * 32768);
  EXPECT_LE(m.total(), best.budget);
  // The runner-up on 4 GPUs fits too, with about half the KV room.
  const LayoutVerdict& tp4 = find(r, 4, 1);
  EXPECT_TRUE(tp4.fits);
  EXPECT_LT(tp4.kv_room_tokens * 3, best.kv_room_tokens * 2);
  // Pipelining over all six GPUs has less room: rank 0 carries the whole embedding.
  EXPECT_LT(find(r, 1, 6).kv_room_tokens, best.kv_room_tokens);
  EXPECT_TRUE(contains(r.recommendation, "Use --tp 2 --pp 3 on 6 GPUs")) << r.recommendation;
  // The explanation names every other layout of the six GPUs, TP 6 with its KV-head copies.
  std::string why;
  for (const auto& w : r.why) why += w + "\n";
  EXPECT_TRUE(contains(why, "--tp 6 --pp 1: room for ")) << why;
  EXPECT_TRUE(contains(why, "its tightest rank (rank 2) holds 3 of the 8 KV heads for 80 layers"))
      << why;
  EXPECT_TRUE(contains(why, "13 KV-head copies per stage")) << why;
  EXPECT_TRUE(contains(why, "--tp 3 --pp 2: ")) << why;
  EXPECT_TRUE(contains(why, "--tp 1 --pp 6: ")) << why;
  EXPECT_FALSE(contains(why, "--tp 2 --pp 3: ")) << why;
}

TEST(Planner, Qwen72BOnSix80GBGpusWeighsReplicas) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  const PlanResult r = plan_layouts(cfg, gpus(6, "80GB"));
  ASSERT_GE(r.best, 0);
  const LayoutVerdict& best = r.layouts[size_t(r.best)];
  EXPECT_EQ(best.layout.dp, 1);
  EXPECT_EQ(best.layout.tp, 2);
  EXPECT_EQ(best.layout.pp, 3);
  const LayoutVerdict* dp2 = nullptr;
  for (const auto& v : r.layouts)
    if (v.layout.dp == 2 && v.layout.tp == 3) dp2 = &v;
  ASSERT_NE(dp2, nullptr);
  // Each TP 3 replica holds a third of the whole model, KV-head copies included: the per-rank
  // bytes are those of --tp 3 alone, and the KV room is two of its replicas'.
  const LayoutVerdict tp3 = evaluate_layout(cfg, {3, 1, {}}, gpus(6, "80GB"));
  EXPECT_TRUE(dp2->fits);
  EXPECT_EQ(dp2->biggest_rank().total(), tp3.biggest_rank().total());
  EXPECT_EQ(dp2->kv_head_copies, 10);
  EXPECT_EQ(dp2->kv_room_tokens, 2 * tp3.kv_room_tokens);
  bool explained = false;
  for (const auto& w : r.why)
    explained |= contains(w, "--dp 2 --tp 3 --pp 1: room for ") &&
                 contains(w, "each of its 2 replicas holds a whole copy of the weights");
  EXPECT_TRUE(explained);
}

TEST(Planner, Qwen72BOnFour80GBGpusRecommendsTp4) {
  const PlanResult r = plan_layouts(fixture("qwen2.5-72b-instruct"), gpus(4, "80GB"));
  ASSERT_GE(r.best, 0);
  EXPECT_EQ(r.layouts[size_t(r.best)].layout.tp, 4);
  EXPECT_EQ(r.layouts[size_t(r.best)].layout.pp, 1);
}

TEST(Planner, NearTiesInKvRoomGoToFewerStagesThenReplicas) {
  // 0.5B on 6 big GPUs: every layout has room to spare; six replicas, TP 2 x PP 3 and TP 1 x PP
  // 6 hold about the same KV, so the one with no stages and no all-reduce wins.
  const PlanResult r = plan_layouts(fixture("qwen2.5-0.5b-instruct"), gpus(6, "80GB"));
  ASSERT_GE(r.best, 0);
  const LayoutVerdict& best = r.layouts[size_t(r.best)];
  EXPECT_EQ(best.layout.dp, 6);
  EXPECT_EQ(best.layout.tp, 1);
  EXPECT_EQ(best.layout.pp, 1);
  EXPECT_TRUE(find(r, 1, 6).fits);
  EXPECT_TRUE(contains(r.command, "mpirun -np 6 qmpi serve --model MODEL_DIR --dp 6 --tp 1 --pp 1"))
      << r.command;
  for (const auto& v : r.layouts) {
    if (!v.fits) continue;
    if (double(v.kv_room_tokens) >= double(best.kv_room_tokens) * (1 - kKvRoomTolerance)) {
      EXPECT_GE(v.layout.pp, best.layout.pp) << "tp " << v.layout.tp << " pp " << v.layout.pp;
    }
    EXPECT_LE(double(v.kv_room_tokens), double(best.kv_room_tokens) / (1 - kKvRoomTolerance));
  }
}

TEST(Planner, PagedKvNeedsOneFullLengthSequenceAndCountsTheRest) {
  // Issue 18: 16 sequences of 32768 tokens on 6 x 80 GB fit, as a paged engine runs them: the
  // cache must hold one sequence, and the plan says how many it holds at once.
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  PlanInputs in = gpus(6, "80GB");
  in.max_num_seqs = 16;
  const PlanResult r = plan_layouts(cfg, in);
  ASSERT_GE(r.best, 0) << r.recommendation;
  const LayoutVerdict& best = r.layouts[size_t(r.best)];
  const RankMemory& m = best.biggest_rank();
  EXPECT_EQ(m.kv_cache, m.kv_per_token * 32768);  // one sequence, not 16
  EXPECT_EQ(best.rank_kv_tokens * best.layout.dp, best.kv_room_tokens);
  EXPECT_EQ(best.full_length_seqs, best.rank_kv_tokens / 32768 * best.layout.dp);
  EXPECT_GE(best.full_length_seqs, 1);
  EXPECT_TRUE(contains(r.recommendation,
                       " tokens of KV cache per rank: " + std::to_string(best.full_length_seqs) +
                           " sequences of 32768 tokens at once"))
      << r.recommendation;
  EXPECT_TRUE(contains(r.command, "--max-num-seqs 16")) << r.command;
  // --max-num-seqs schedules; it reserves nothing, so the verdicts do not move with it (but
  // for the logit rows of a step).
  PlanInputs one = in;
  one.max_num_seqs = 1;
  const PlanResult r1 = plan_layouts(cfg, one);
  ASSERT_EQ(r1.best, r.best);
  EXPECT_EQ(r1.layouts[size_t(r1.best)].biggest_rank().kv_cache, m.kv_cache);
  EXPECT_NO_THROW(preflight(cfg, best.layout, in));
  // A sequence longer than any rank's room does not fit, whatever --max-num-seqs says.
  PlanInputs longest = one;
  longest.max_model_len = 4'000'000;
  longest.max_step_tokens = 2048;
  const PlanResult r2 = plan_layouts(cfg, longest);
  EXPECT_EQ(r2.best, -1);
  EXPECT_EQ(r2.failure, Err::KvCacheDoesNotFit);
}

TEST(Planner, CpuKvCacheTakesAShareOfTheMemoryLeftLikeCuda) {
  const ModelConfig cfg = fixture("qwen2.5-7b-instruct");
  PlanInputs in = cpu_ranks(2, "80GB", 1000);
  in.max_num_seqs = 3;
  EXPECT_EQ(kv_cache_tokens(cfg, in), 1008);  // one sequence must fit; max-num-seqs reserves none
  const LayoutVerdict v = evaluate_layout(cfg, {2, 1, {}}, in);
  ASSERT_TRUE(v.fits);
  EXPECT_EQ(v.rank_kv_tokens, v.kv_room_tokens);  // the memory left, as on CUDA
  const uint64_t per_token = v.ranks[0].kv_per_token;
  EXPECT_LE(uint64_t(v.rank_kv_tokens) * per_token, uint64_t(kCpuKvMemoryShare * double(v.budget)));
  EXPECT_GT(uint64_t(v.rank_kv_tokens + 1) * per_token,
            uint64_t(kCpuKvMemoryShare * double(v.budget)));
  EXPECT_EQ(v.full_length_seqs, v.rank_kv_tokens / 1008);
  EXPECT_GT(v.full_length_seqs, 3);
  // 200 sequences of the 72B's 32k tokens no longer need reserving up front: it plans.
  const ModelConfig big = fixture("qwen2.5-72b-instruct");
  PlanInputs many = cpu_ranks(6, "80GB");
  many.max_num_seqs = 200;
  EXPECT_GE(plan_layouts(big, many).best, 0);
}

TEST(Planner, TensorParallelStaysInsideAHost) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  PlanInputs in = gpus(6, "80GB");
  in.nodes = 3;  // 2 GPUs per host
  EXPECT_EQ(evaluate_layout(cfg, {4, 1, {}}, in).code, Err::TpSpansHosts);
  EXPECT_TRUE(evaluate_layout(cfg, {2, 3, {}}, in).valid);
  EXPECT_EQ(evaluate_layout(cfg, {2, 3, {}}, in).cross_host_hops, 2);
  in.nodes = 2;  // 3 per host: a TP-2 group of stage 1 would be ranks 2-3, on both hosts
  const LayoutVerdict v = evaluate_layout(cfg, {2, 3, {}}, in);
  EXPECT_EQ(v.code, Err::TpSpansHosts);
  EXPECT_TRUE(contains(v.reason, "ranks 2-3")) << v.reason;

  PlanInputs two_hosts = gpus(8, "80GB");
  two_hosts.nodes = 2;
  const PlanResult r = plan_layouts(cfg, two_hosts);
  ASSERT_GE(r.best, 0);
  EXPECT_EQ(r.layouts[size_t(r.best)].cross_host_hops, 0);  // 72B fits on one host of 4
  EXPECT_EQ(find(r, 2, 4).cross_host_hops, 1);
  EXPECT_TRUE(contains(launch_command({2, 4, {}}, two_hosts), "--map-by ppr:4:node"));
}

TEST(Planner, CpuBudgetIsHostMemoryPerRank) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  PlanInputs in;
  in.backend = BackendKind::Cpu;
  in.gpus = 6;
  in.host_mem = 24ull << 30;
  in.max_model_len = 4096;
  const PlanResult r = plan_layouts(cfg, in);
  ASSERT_GE(r.best, 0);
  EXPECT_EQ(find(r, 2, 3).budget, 4ull << 30);
  EXPECT_EQ(find(r, 1, 1).budget, 24ull << 30);
  EXPECT_FALSE(contains(r.command, "--backend cuda"));
  in.host_mem = 1ull << 30;  // 170 MiB per rank: nothing fits
  EXPECT_EQ(plan_layouts(cfg, in).best, -1);
}

TEST(Preflight, InvalidLayoutRaisesTheRuleAndTheLayoutThatWorks) {
  PlanInputs in = gpus(16, "80GB");
  in.model_arg = "--model M";
  try {
    preflight(fixture("qwen2.5-0.5b-instruct"), {16, 1, {}}, in);
    FAIL() << "--tp 16 passed on 14 heads";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::TpExceedsHeads);
    EXPECT_TRUE(contains(e.message(), "larger than num_attention_heads (14)")) << e.message();
    // 16 replicas of the small model: the layout that runs it on all 16 GPUs.
    EXPECT_TRUE(contains(e.fix(), "qmpi serve --model M --dp 16 --tp 1 --pp 1")) << e.fix();
  }
}

TEST(Preflight, UnevenTpOn72BPassesWhenItFits) {
  PlanInputs in = gpus(6, "80GB");
  EXPECT_NO_THROW(preflight(fixture("qwen2.5-72b-instruct"), {6, 1, {}}, in));
}

TEST(Preflight, WeightsThatDoNotFitRaiseWithTheNumbers) {
  PlanInputs in = gpus(6, "24GiB");
  try {
    preflight(fixture("qwen2.5-72b-instruct"), {2, 3, {}}, in);
    FAIL() << "72B fitted in 6 x 24 GiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::WeightsDoNotFit);
    EXPECT_TRUE(contains(e.message(), "rank 0 (stage 0, TP rank 0, layers 0-26) needs"))
        << e.message();
    EXPECT_TRUE(contains(e.message(), "but has 21.60 GiB")) << e.message();
    EXPECT_TRUE(contains(e.fix(), "int4")) << e.fix();
  }
}

TEST(Preflight, KvCacheThatDoesNotFitRaisesKvCode) {
  PlanInputs in = cpu_ranks(6, "80GB");
  in.max_model_len = 4'000'000;  // one sequence: 1.2 TiB of bf16 KV over the 6 ranks
  try {
    preflight(fixture("qwen2.5-72b-instruct"), {2, 3, {}}, in);
    FAIL() << "a 4M-token sequence fitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::KvCacheDoesNotFit);
    EXPECT_TRUE(contains(e.fix(), "--max-model-len")) << e.fix();
  }
}

TEST(Preflight, ActivationsThatDoNotFitAreTheKvErrorNotTheWeights) {
  // 7B's weights fit one 80 GB GPU many times over; a million sequences' step does not.
  PlanInputs in = gpus(1, "80GB", 4096);
  in.max_num_seqs = 1000000;
  try {
    preflight(fixture("qwen2.5-7b-instruct"), {1, 1, {}}, in);
    FAIL() << "a million sequences fitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::KvCacheDoesNotFit) << e.message();
    EXPECT_TRUE(contains(e.fix(), "--max-num-seqs")) << e.fix();
  }
}

TEST(Preflight, TheSuggestedLaunchRepeatsTheCommandThatRan) {
  PlanInputs in = gpus(16, "80GB");
  in.model_arg = "--model M";
  in.command = "batch --input in.jsonl --output out.jsonl";
  try {
    preflight(fixture("qwen2.5-0.5b-instruct"), {16, 1, {}}, in);
    FAIL() << "--tp 16 passed on 14 heads";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.fix(), "qmpi batch --input in.jsonl --output out.jsonl --model M --dp "))
        << e.fix();
  }
}

TEST(Preflight, PassesWhatFitsAndSkipsMemoryWithoutABudget) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  EXPECT_NO_THROW(preflight(cfg, {2, 3, {}}, gpus(6, "80GB")));
  PlanInputs unknown;
  unknown.gpus = 6;  // gpu_mem 0: no budget figure
  EXPECT_NO_THROW(preflight(cfg, {2, 3, {}}, unknown));
  EXPECT_NO_THROW(preflight(cfg, {6, 1, {}}, unknown));
  EXPECT_THROW(preflight(cfg, {65, 1, {}}, unknown), Error);  // 64 heads
}

TEST(MoePlan, Qwen2Moe57BCountsAndLayouts) {
  const ModelConfig cfg = fixture("qwen2-57b-a14b");
  const ParamCounts n = param_counts(cfg);
  EXPECT_NEAR(double(n.total), 57.409e9, 0.001e9);  // facts §7
  EXPECT_NEAR(double(n.active), 14.25e9, 0.01e9);
  PlanInputs in = gpus(6, "80GB");
  in.kv_dtype = DType::BF16;
  EXPECT_NEAR(double(model_weight_bytes(cfg, in)) / 1e9, 114.82, 0.0051);
  PlanInputs int4 = in;
  int4.int4_weights = true;
  EXPECT_NEAR(double(model_weight_bytes(cfg, int4)) / 1e9, 31.45, 0.0051);
  EXPECT_EQ(kv_bytes_per_token(cfg, DType::BF16), 57344u);  // 56 KiB per token
  const PlanResult r = plan_layouts(cfg, in);
  ASSERT_GE(r.best, 0) << r.recommendation;
  // TP 2 x PP 3: each TP rank holds 32 of the 64 experts of its stage's layers.
  const LayoutVerdict& v = find(r, 2, 3);
  ASSERT_TRUE(v.valid);
  const uint64_t expert = 3ull * 3584 * 2560 * 2;  // one expert of one layer, bf16
  for (const auto& m : v.ranks)
    EXPECT_EQ(m.expert_weights, uint64_t(m.layers.size()) * 32 * expert) << m.rank;
}

TEST(MoePlan, Qwen3Moe30BCountsAndExpertBytesPerRank) {
  const ModelConfig cfg = fixture("qwen3-30b-a3b");
  const ParamCounts n = param_counts(cfg);
  EXPECT_NEAR(double(n.total), 30.532e9, 0.001e9);
  EXPECT_NEAR(double(n.active), 3.35e9, 0.01e9);
  PlanInputs in = gpus(2, "80GB");
  EXPECT_NEAR(double(model_weight_bytes(cfg, in)) / 1e9, 61.06, 0.0051);
  EXPECT_EQ(kv_bytes_per_token(cfg, DType::BF16), 98304u);
  const PlanResult r = plan_layouts(cfg, in);
  ASSERT_GE(r.best, 0) << r.recommendation;
  const LayoutVerdict& v = find(r, 2, 1);
  ASSERT_TRUE(v.valid && v.fits);
  const uint64_t all_experts = uint64_t(n.experts) * 2;
  for (const auto& m : v.ranks) EXPECT_EQ(m.expert_weights, all_experts / 2);
  // The experts are most of a rank's bytes: 57.98 of 61.06 GB in all.
  EXPECT_NEAR(double(all_experts) / 1e9, 57.98, 0.01);
}

TEST(MoePlan, Qwen3Moe235BPlansOnEightH200s) {
  const ModelConfig cfg = fixture("qwen3-235b-a22b");
  const ParamCounts n = param_counts(cfg);
  EXPECT_NEAR(double(n.total), 235.094e9, 0.001e9);
  EXPECT_NEAR(double(n.active), 22.19e9, 0.01e9);
  const PlanResult r = plan_layouts(cfg, gpus(8, "141GB"));
  ASSERT_GE(r.best, 0) << r.recommendation;
  EXPECT_EQ(r.layouts[size_t(r.best)].gpus(), 8);
  // Uneven: 128 experts over TP 6 are 22, 22, 21, 21, 21, 21 per layer.
  const PlanResult six = plan_layouts(cfg, gpus(6, "141GB"));
  const LayoutVerdict& v = find(six, 6, 1);
  ASSERT_TRUE(v.valid);
  const uint64_t expert = 3ull * 4096 * 1536 * 2;
  EXPECT_EQ(v.ranks[0].expert_weights, 94ull * 22 * expert);
  EXPECT_EQ(v.ranks[5].expert_weights, 94ull * 21 * expert);
  // 470 GB of bf16 weights do not fit on 2 of them, and the planner says so.
  EXPECT_LT(plan_layouts(cfg, gpus(2, "141GB")).best, 0);
}

}  // namespace
}  // namespace qmpi
