// Per-rank memory arithmetic on real Qwen configs (tests/fixtures/configs, written from the
// facts sheet §1), against the facts sheet's §7 table and against sums computed independently.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "core/errors.h"
#include "plan/checkpoint_dtypes.h"
#include "plan/memory_model.h"

namespace qmpi {
namespace {

namespace fs = std::filesystem;

ModelConfig fixture(const std::string& name) {
  return ModelConfig::load(std::string(QMPI_SOURCE_DIR) + "/tests/fixtures/configs/" + name +
                           ".json");
}

struct FactsRow {
  const char* fixture;
  uint64_t kv_bytes_per_token_bf16;
  double params;   // facts §7 "params total"
  double bf16_gb;  // GB = 1e9 bytes, two decimals as printed in the table
  double int4_gb;
};

constexpr FactsRow kFacts[] = {
    {"qwen2.5-0.5b-instruct", 12288, 494.0e6, 0.99, 0.46},
    {"qwen2.5-1.5b-instruct", 28672, 1.544e9, 3.09, 1.15},
    {"qwen2.5-7b-instruct", 57344, 7.616e9, 15.23, 5.57},
    {"qwen2.5-14b-instruct", 196608, 14.770e9, 29.54, 9.98},
    {"qwen2.5-32b-instruct", 262144, 32.764e9, 65.53, 19.33},
    {"qwen2.5-72b-instruct", 327680, 72.706e9, 145.41, 41.46},
};

uint64_t numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

PlanInputs gpu_inputs(int gpus, const std::string& mem) {
  PlanInputs in;
  in.gpus = gpus;
  in.gpu_mem = parse_byte_size(mem, "--gpu-mem");
  return in;
}

TEST(MemoryModel, KvBytesPerTokenMatchFactsAndFormula) {
  for (const auto& row : kFacts) {
    const ModelConfig cfg = fixture(row.fixture);
    const auto& raw = cfg.raw;
    const uint64_t head_dim =
        raw["hidden_size"].get<uint64_t>() / raw["num_attention_heads"].get<uint64_t>();
    const uint64_t formula = 2 * raw["num_hidden_layers"].get<uint64_t>() *
                             raw["num_key_value_heads"].get<uint64_t>() * head_dim * 2;
    EXPECT_EQ(kv_bytes_per_token(cfg, DType::BF16), formula) << row.fixture;
    EXPECT_EQ(kv_bytes_per_token(cfg, DType::BF16), row.kv_bytes_per_token_bf16) << row.fixture;
    EXPECT_EQ(kv_bytes_per_token(cfg, DType::F32), 2 * formula) << row.fixture;
    // fp8 adds a float32 scale per token and KV head to each of K and V.
    const uint64_t scales = 2 * raw["num_hidden_layers"].get<uint64_t>() *
                            raw["num_key_value_heads"].get<uint64_t>() * sizeof(float);
    EXPECT_EQ(kv_bytes_per_token(cfg, DType::F8_E4M3), formula / 2 + scales) << row.fixture;
    EXPECT_EQ(
        kv_bytes_per_token(cfg, 1, 1, DType::BF16) * uint64_t(cfg.num_layers * cfg.num_kv_heads),
        formula)
        << row.fixture;
  }
  EXPECT_EQ(format_bytes(kv_bytes_per_token(fixture("qwen2.5-72b-instruct"), DType::BF16)),
            "320 KiB");
}

TEST(MemoryModel, WholeModelWeightsMatchFactsTable) {
  for (const auto& row : kFacts) {
    const ModelConfig cfg = fixture(row.fixture);
    PlanInputs in;
    uint64_t tensors = 0;
    for (const auto& t : expected_tensors(cfg)) tensors += numel(t.shape) * 2;
    const uint64_t bytes = model_weight_bytes(cfg, in);
    EXPECT_EQ(bytes, tensors) << row.fixture;
    EXPECT_NEAR(double(bytes) / 2, row.params, row.params * 5e-4) << row.fixture;
    EXPECT_NEAR(double(bytes) / 1e9, row.bf16_gb, 0.0051) << row.fixture;
    in.int4_weights = true;
    EXPECT_NEAR(double(model_weight_bytes(cfg, in)) / 1e9, row.int4_gb, 0.0051) << row.fixture;
  }
}

// Over all ranks of a layout, the weights add up to the checkpoint plus what is held twice:
// norms on every TP rank, the final norm on every last-stage TP rank, and a tied embedding
// on both the first and the last stage.
TEST(MemoryModel, RankWeightsSumToModelPlusReplicas) {
  for (const auto& row : kFacts) {
    const ModelConfig cfg = fixture(row.fixture);
    const int L3 = int(cfg.num_layers) - 3;
    const std::vector<Layout> layouts = {{1, 1, {}}, {2, 1, {}}, {1, 3, {}},           {2, 3, {}},
                                         {2, 2, {}}, {1, 6, {}}, {2, 4, {L3, 1, 1, 1}}};
    const auto tensors = expected_tensors(cfg);
    PlanInputs in;
    const uint64_t whole = model_weight_bytes(cfg, in);
    const uint64_t h = uint64_t(cfg.hidden_size), L = uint64_t(cfg.num_layers);
    for (const auto& layout : layouts) {
      uint64_t sum = 0;
      for (int r = 0; r < layout.tp * layout.pp; ++r)
        sum += rank_memory(cfg, make_shard_plan(cfg, layout, r), in, tensors).weights;
      const uint64_t tp = uint64_t(layout.tp);
      uint64_t replicas = (tp - 1) * (2 * h * L + h) * 2;
      if (cfg.tie_word_embeddings && layout.pp > 1) replicas += uint64_t(cfg.vocab_size) * h * 2;
      EXPECT_EQ(sum, whole + replicas)
          << row.fixture << " --tp " << layout.tp << " --pp " << layout.pp;
    }
  }
}

TEST(MemoryModel, EmbeddingAndLmHeadRanksAreHeavier) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  const auto tensors = expected_tensors(cfg);
  const PlanInputs in = gpu_inputs(6, "80GB");
  const Layout layout{1, 4, {}};  // 20 layers per stage: only embed/lm_head differ
  std::vector<uint64_t> w;
  for (int r = 0; r < 4; ++r)
    w.push_back(rank_memory(cfg, make_shard_plan(cfg, layout, r), in, tensors).weights);
  const uint64_t embed = uint64_t(cfg.vocab_size * cfg.hidden_size) * 2;
  EXPECT_EQ(w[1], w[2]);
  EXPECT_EQ(w[0], w[1] + embed);
  EXPECT_EQ(w[3], w[1] + embed + uint64_t(cfg.hidden_size) * 2);  // lm_head + final norm
}

TEST(MemoryModel, KvCacheAndActivationsOfOneRank) {
  const ModelConfig cfg = fixture("qwen2.5-72b-instruct");
  PlanInputs in = gpu_inputs(6, "80GB");
  in.max_model_len = 32768;
  in.max_num_seqs = 2;
  in.kv_dtype = DType::BF16;
  const ShardPlan plan = make_shard_plan(cfg, {2, 3, {}}, 5);  // last stage, TP rank 1
  const RankMemory m = rank_memory(cfg, plan, in, expected_tensors(cfg));
  EXPECT_EQ(m.layers.size(), 26);
  EXPECT_EQ(m.kv_per_token, 2ull * 26 * 4 * 128 * 2);
  EXPECT_EQ(m.kv_cache, m.kv_per_token * 32768);  // one sequence: CUDA reserves no more
  // T = 32768 step tokens x (3h + 2q + 2kv + 2im) floats, + per sequence h + per_rank(1+tp) +
  // 2V floats on the last stage.
  const uint64_t T = 32768, h = 8192, q = 32 * 128, kv = 4 * 128, im = 29568 / 2;
  const uint64_t per_rank = (152064 + 1) / 2;
  const uint64_t floats =
      T * (3 * h + 2 * q + 2 * kv + 2 * im) + 2 * (h + per_rank * 3 + 2 * 152064);
  EXPECT_EQ(m.activations, floats * 4);
  EXPECT_EQ(m.overhead, kRuntimeOverheadCuda);
  EXPECT_EQ(m.total(), m.weights + m.kv_cache + m.activations + m.overhead);
}

TEST(MemoryModel, KvTokensFollowTheEngineDefaultsAndBlocks) {
  const ModelConfig cfg = fixture("qwen2.5-7b-instruct");
  PlanInputs in;
  EXPECT_EQ(resolved_max_model_len(cfg, in), 32768);  // max_position_embeddings, as vLLM
  EXPECT_EQ(kv_cache_tokens(cfg, in), 32768);
  in.max_model_len = 1000;
  in.max_num_seqs = 3;
  EXPECT_EQ(sequence_kv_tokens(cfg, in), 1008);  // whole 16-token blocks
  // CUDA sizes the cache from the memory left: one sequence is what it must hold.
  EXPECT_FALSE(kv_cache_fixed(in));
  EXPECT_EQ(kv_cache_tokens(cfg, in), 1008);
  // So must the CPU cache, whose blocks take memory only as they are written.
  in.backend = BackendKind::Cpu;
  EXPECT_FALSE(kv_cache_fixed(in));
  EXPECT_EQ(kv_cache_tokens(cfg, in), 1008);
  in.kv_blocks = 10;
  EXPECT_EQ(kv_cache_tokens(cfg, in), 160);
}

TEST(MemoryModel, BudgetPerBackend) {
  PlanInputs in = gpu_inputs(6, "24GiB");
  EXPECT_EQ(rank_budget(in, 6), uint64_t(24.0 * (1ull << 30) * 0.9));
  in.backend = BackendKind::Cpu;
  in.host_mem = 120ull << 30;
  in.nodes = 2;  // 3 ranks per host
  EXPECT_EQ(rank_budget(in, 6), 40ull << 30);
  EXPECT_EQ(rank_budget(in, 2), 60ull << 30);  // a 2-rank layout fits on one host
  EXPECT_EQ(rank_memory(fixture("qwen2.5-0.5b-instruct"),
                        make_shard_plan(fixture("qwen2.5-0.5b-instruct"), {1, 1, {}}, 0), in,
                        expected_tensors(fixture("qwen2.5-0.5b-instruct")))
                .overhead,
            kRuntimeOverheadCpu);
}

TEST(MemoryModel, CheckpointDtypesOverrideTorchDtype) {
  const ModelConfig cfg = fixture("qwen2.5-0.5b-instruct");
  PlanInputs in;
  const uint64_t bf16 = model_weight_bytes(cfg, in);
  in.tensor_dtypes["model.norm.weight"] = DType::F32;
  EXPECT_EQ(model_weight_bytes(cfg, in), bf16 + 896 * 2);
}

TEST(ByteSize, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_byte_size("24GiB", "--gpu-mem"), 24ull << 30);
  EXPECT_EQ(parse_byte_size("80GB", "--gpu-mem"), 80'000'000'000ull);
  EXPECT_EQ(parse_byte_size("512 MiB", "--gpu-mem"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5tib", "--gpu-mem"), 3ull << 39);
  EXPECT_EQ(parse_byte_size("4096", "--gpu-mem"), 4096u);
  for (const char* bad : {"24G", "GiB", "24 parsecs", "", "-3GB", "0GB"}) {
    try {
      parse_byte_size(bad, "--gpu-mem");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Err::Usage) << bad;
      EXPECT_NE(e.message().find("--gpu-mem"), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(format_bytes(327680), "320 KiB");
  EXPECT_EQ(format_bytes(1536ull << 20), "1.50 GiB");
  EXPECT_EQ(format_gib(145'412'407'296ull), "135.43");
  EXPECT_EQ(format_gb(145'412'407'296ull), "145.41 GB");
}

class CheckpointDtypes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("qmpi_plan_dtypes_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A header-only safetensors file: the planner must not need the data behind it.
  void write_shard(const std::string& name, const nlohmann::json& header) {
    const std::string text = header.dump();
    std::ofstream out(dir_ / name, std::ios::binary);
    const uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) out.put(char((n >> (8 * i)) & 0xff));
    out << text;
  }
  fs::path dir_;
};

TEST_F(CheckpointDtypes, ReadsHeadersOfPresentShardsOnly) {
  write_shard(
      "model-00001-of-00002.safetensors",
      {{"__metadata__", {{"format", "pt"}}},
       {"model.norm.weight", {{"dtype", "F32"}, {"shape", {896}}, {"data_offsets", {0, 3584}}}},
       {"model.embed_tokens.weight",
        {{"dtype", "BF16"}, {"shape", {151936, 896}}, {"data_offsets", {3584, 3584}}}}});
  nlohmann::json index = {{"metadata", {{"total_size", 1}}},
                          {"weight_map",
                           {{"model.norm.weight", "model-00001-of-00002.safetensors"},
                            {"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                            {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  const auto dtypes = read_checkpoint_dtypes(dir_.string());
  ASSERT_EQ(dtypes.size(), 2u);
  EXPECT_EQ(dtypes.at("model.norm.weight"), DType::F32);
  EXPECT_EQ(dtypes.at("model.embed_tokens.weight"), DType::BF16);
  EXPECT_TRUE(read_checkpoint_dtypes((dir_ / "model.safetensors.index.json").string()).empty());
}

TEST_F(CheckpointDtypes, BadHeaderNamesTheFile) {
  std::ofstream(dir_ / "model.safetensors") << "version https://git-lfs.github.com/spec/v1\n";
  try {
    read_checkpoint_dtypes(dir_.string());
    FAIL() << "a Git LFS pointer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::SafetensorsHeader);
    EXPECT_NE(e.message().find("model.safetensors"), std::string::npos) << e.message();
  }
}

TEST_F(CheckpointDtypes, IndexOutsideTheFolderIsRefused) {
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"weight_map": {"model.norm.weight": "../elsewhere.safetensors"}})";
  try {
    read_checkpoint_dtypes(dir_.string());
    FAIL() << "a shard outside the folder was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Err::IndexInvalid);
  }
}

}  // namespace
}  // namespace qmpi
