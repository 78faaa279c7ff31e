// LoRA adapters loaded onto the projections of each TP rank: the base projection plus
// LoraDelta equals x . (W + scale B A)^T computed on the host in double, summed over the ranks
// for the row-parallel o_proj and down_proj; rows of another adapter or none are untouched; and
// adapters that do not fit the base give their catalogue errors.
#include "model/lora_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "../expect_error.h"
#include "../temp_dir.h"
#include "backend/cpu/cpu_backend.h"
#include "io/safetensors_writer.h"
#include "model/lora_delta.h"
#include "model/presets.h"
#include "model/synthetic.h"
#include "model/synthetic_lora.h"

namespace qmpi {
namespace {

using testing::expect_error;
using testing::TempDir;

ModelConfig small_config() {
  nlohmann::json j = preset_config("tiny").raw;
  j["num_hidden_layers"] = 2;
  j["vocab_size"] = 512;
  j["torch_dtype"] = "float32";
  return ModelConfig::from_json(j, "test");
}

// Full float64 weights of a tensor the generators made.
std::vector<double> values(uint64_t seed, const std::string& name, std::vector<int64_t> shape) {
  const SyntheticTensor t(seed, name, shape);
  std::vector<double> out(size_t(shape[0] * shape[1]));
  for (size_t i = 0; i < out.size(); ++i) out[i] = double(t.value(int64_t(i)));
  return out;
}

struct Case {
  std::string module;  // layer 1's projection
  int tp;
};

class LoraLoader : public ::testing::TestWithParam<Case> {};

TEST_P(LoraLoader, BasePlusDeltaEqualsMergedWeightsOnEveryRank) {
  const Case c = GetParam();
  const ModelConfig cfg = small_config();
  TempDir dir;
  SyntheticLoraSpec spec;
  spec.r = 4;
  spec.alpha = 6;
  spec.seed = 9;
  spec.targets = {c.module};
  write_synthetic_lora(dir.str(), cfg, spec);
  LoraOptions opts;
  opts.modules = {{"other", dir.str()}, {"x", dir.str()}};  // adapter 1 is the one used
  opts.max_loras = 2;

  const LoraModuleShape s = lora_module_shape(cfg, c.module);
  const std::string base = "model.layers.1." + std::string(s.block) + "." + c.module + ".weight";
  const auto W = values(0, base, {s.out, s.in});
  const auto A = values(spec.seed, peft_tensor_name(cfg, 1, c.module, 'A'), {spec.r, s.in});
  const auto B = values(spec.seed, peft_tensor_name(cfg, 1, c.module, 'B'), {s.out, spec.r});
  const double scale = spec.alpha / double(spec.r);
  std::vector<double> bias;  // Qwen2's q/k/v biases
  if (cfg.qkv_bias && (c.module == "q_proj" || c.module == "v_proj")) {
    const std::string name = "model.layers.1.self_attn." + c.module + ".bias";
    const SyntheticTensor t(0, name, {s.out});
    for (int64_t o = 0; o < s.out; ++o) bias.push_back(double(t.value(o)));
  }
  const int64_t n = 3;  // rows 0 and 2 run adapter 1, row 1 the base model
  std::vector<float> x(size_t(n * s.in));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.37 * double(i)));

  const bool row_parallel = c.module == "o_proj" || c.module == "down_proj";
  std::vector<double> sum(size_t(n * s.out), 0.0);
  CpuBackend be;
  for (int rank = 0; rank < c.tp; ++rank) {
    const ShardPlan plan = make_shard_plan(cfg, Layout{c.tp, 1, {}}, rank);
    SyntheticWeights src(cfg, 0, DType::F32);
    DecoderWeights w = load_decoder_weights(cfg, plan, src, be);
    load_lora_adapters(cfg, plan, opts, be, w);
    const LayerWeights& L = w.layers[1];
    const Linear& lin = c.module == "q_proj"    ? L.attn.q
                        : c.module == "v_proj"  ? L.attn.v
                        : c.module == "o_proj"  ? L.attn.o
                        : c.module == "up_proj" ? L.mlp.up
                                                : L.mlp.down;
    ASSERT_EQ(lin.lora.size(), 2u);
    const auto split = *plan.slice_for(cfg, base);
    const int64_t begin = split.length < 0 ? 0 : split.start;
    const int64_t in = lin.in_features(), out = lin.out_features();
    std::vector<float> xs(size_t(n * in));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < in; ++k)
        xs[size_t(r * in + k)] = x[size_t(r * s.in + (row_parallel ? begin : 0) + k)];
    std::vector<float> y(size_t(n * out));
    lin.forward(be, xs.data(), n, y.data());
    const LoraRows groups[] = {{1, {0, 2}}};
    LoraDelta delta(be);
    const LinearOut target[] = {{&lin, y.data()}};
    delta.add(target, xs.data(), n, groups);
    // Row-parallel ranks hold partial sums (the all-reduce adds them); column-parallel ones
    // hold output rows, a KV head's rows on two ranks when its group straddles them (TP 5).
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double& at = sum[size_t(r * s.out + (row_parallel ? 0 : begin) + o)];
        at = (row_parallel ? at : 0.0) + y[size_t(r * out + o)];
      }
  }
  // Host float64: y = x W^T (+ scale x A^T B^T for the adapted rows).
  double worst = 0, largest = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < s.out; ++o) {
      double want = bias.empty() ? 0.0 : bias[size_t(o)];
      for (int64_t k = 0; k < s.in; ++k) {
        double merged = W[size_t(o * s.in + k)];
        if (r != 1)
          for (int64_t j = 0; j < spec.r; ++j)
            merged += scale * B[size_t(o * spec.r + j)] * A[size_t(j * s.in + k)];
        want += double(x[size_t(r * s.in + k)]) * merged;
      }
      worst = std::max(worst, std::abs(sum[size_t(r * s.out + o)] - want));
      largest = std::max(largest, std::abs(want));
    }
  EXPECT_LE(worst / largest, 1e-5) << c.module << " tp " << c.tp;
}

INSTANTIATE_TEST_SUITE_P(Modules, LoraLoader,
                         ::testing::Values(Case{"q_proj", 1}, Case{"v_proj", 5}, Case{"o_proj", 5},
                                           Case{"up_proj", 3}, Case{"down_proj", 3},
                                           Case{"o_proj", 2}),
                         [](const auto& info) {
                           return info.param.module + "_tp" + std::to_string(info.param.tp);
                         });

// --dtype auto (bf16 activations) holds the float32 adapter of a bf16 projection in bf16, half
// the bytes; --dtype float32, and a float32 base under either, keep the file's float32.
TEST(LoraLoaderDtype, Bf16ProjectionsHoldBf16AdaptersUnderBf16Activations) {
  const ModelConfig cfg = small_config();
  TempDir dir;
  SyntheticLoraSpec spec;
  spec.r = 4;
  spec.targets = {"q_proj", "down_proj"};
  write_synthetic_lora(dir.str(), cfg, spec);
  LoraOptions opts;
  opts.modules = {{"x", dir.str()}};
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  const LoraModuleShape q = lora_module_shape(cfg, "q_proj");
  const LoraModuleShape down = lora_module_shape(cfg, "down_proj");
  const uint64_t elements = uint64_t(cfg.num_layers * spec.r * (q.in + q.out + down.in + down.out));
  CpuBackend be;
  for (const auto& [base, bf16_act, held] :
       {std::tuple{DType::BF16, true, DType::BF16}, std::tuple{DType::BF16, false, DType::F32},
        std::tuple{DType::F32, true, DType::F32}}) {
    SyntheticWeights src(cfg, 0, base);
    DecoderWeights w = load_decoder_weights(cfg, plan, src, be);
    const uint64_t bytes = load_lora_adapters(cfg, plan, opts, be, w, bf16_act);
    for (const LayerWeights& L : w.layers)
      for (const Linear* lin : {&L.attn.q, &L.mlp.down}) {
        EXPECT_EQ(lin->lora.at(0).a.dtype, held);
        EXPECT_EQ(lin->lora.at(0).b.dtype, held);
      }
    EXPECT_EQ(bytes, elements * dtype_size(held));
    if (held != DType::BF16 || base != DType::BF16) continue;
    // Rounded to nearest even from the file's float32 values.
    const auto A = values(spec.seed, peft_tensor_name(cfg, 0, "q_proj", 'A'), {spec.r, q.in});
    const auto* got = w.layers[0].attn.q.lora.at(0).a.storage.as<uint16_t>();
    for (size_t i = 0; i < A.size(); ++i) ASSERT_EQ(got[i], f32_to_bf16(float(A[i]))) << i;
  }
}

// An adapter folder written by hand: the given tensors (F32 zeros) and a q_proj config.
std::string write_adapter(const TempDir& dir,
                          const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                          int64_t r = 4) {
  SafetensorsWriter w;
  for (const auto& [name, shape] : tensors)
    w.add(name, DType::F32, shape,
          [](int64_t, int64_t count, void* dst) { std::memset(dst, 0, size_t(count) * 4); });
  w.write(dir.file("adapter_model.safetensors"));
  std::ofstream(dir.file("adapter_config.json")) << nlohmann::json{
      {"r", r},
      {"lora_alpha", 8},
      {"target_modules", {"q_proj", "o_proj"}}}.dump();
  return dir.str();
}

void expect_load_error(const std::string& path, Err code,
                       std::initializer_list<std::string> needles, int max_rank = 16) {
  const ModelConfig cfg = small_config();
  const ShardPlan plan = make_shard_plan(cfg, Layout{1, 1, {}}, 0);
  CpuBackend be;
  DecoderWeights w;
  w.layers.resize(2);
  LoraOptions opts;
  opts.modules = {{"bad", path}};
  opts.max_lora_rank = max_rank;
  expect_error([&] { load_lora_adapters(cfg, plan, opts, be, w); }, code, needles);
}

const char* const kQA = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
const char* const kQB = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";

TEST(LoraLoaderErrors, ShapesHalvesModulesLayersAndRank) {
  {
    TempDir d;  // q_proj is [192, 192]: B [192, 4]
    expect_load_error(write_adapter(d, {{kQA, {4, 192}}, {kQB, {190, 4}}}), Err::LoraShapeMismatch,
                      {kQB, "[190, 4]", "[192, 4]"});
  }
  {
    TempDir d;
    expect_load_error(write_adapter(d, {{kQA, {4, 192}}}), Err::LoraShapeMismatch,
                      {"has lora_A but no lora_B"});
  }
  {
    TempDir d;
    expect_load_error(write_adapter(d, {{kQA, {8, 192}}, {kQB, {192, 8}}}), Err::LoraShapeMismatch,
                      {"r 4"});
  }
  {
    TempDir d;
    const std::string a = "base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight";
    expect_load_error(write_adapter(d, {{a, {4, 192}}}), Err::LoraModuleUnknown,
                      {"target_modules does not name"});
  }
  {
    TempDir d;
    const std::string a = "base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight";
    expect_load_error(write_adapter(d, {{a, {4, 192}}}), Err::LoraModuleUnknown, {"layer 7"});
  }
  {
    TempDir d;
    expect_load_error(write_adapter(d, {{"base_model.model.lm_head.lora_A.weight", {4, 192}}}),
                      Err::LoraModuleUnknown, {"lm_head"});
  }
  {
    TempDir d;
    expect_load_error(write_adapter(d, {{kQA, {32, 192}}, {kQB, {192, 32}}}, 32),
                      Err::LoraRankTooLarge, {"32", "--max-lora-rank 16"});
  }
}

TEST(LoraLoaderErrors, TruncatedOrMissingFilesAreUnreadable) {
  TempDir d;
  const std::string path = write_adapter(d, {{kQA, {4, 192}}, {kQB, {192, 4}}});
  const auto file = d.file("adapter_model.safetensors");
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 64);
  expect_load_error(path, Err::LoraAdapterUnreadable, {"\"bad\"", "adapter_model.safetensors"});
  std::filesystem::remove(file);
  expect_load_error(path, Err::LoraAdapterUnreadable, {"adapter_model.safetensors"});
}

}  // namespace
}  // namespace qmpi
