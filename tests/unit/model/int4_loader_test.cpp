// An int4 checkpoint written by make-model, read back slice by slice as every TP rank would
// read it, multiplies like the float model it dequantizes to; and damaged int4 tensors get the
// catalogue's errors.
#include "model/int4_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "../temp_dir.h"
#include "backend/cpu/cpu_backend.h"
#include "core/errors.h"
#include "io/safetensors_writer.h"
#include "model/presets.h"
#include "model/shard_plan.h"
#include "model/synthetic_int4_checkpoint.h"

namespace qmpi {
namespace {

using nlohmann::json;
using testing::TempDir;

const char* const kProjections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                    "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                    "mlp.down_proj"};

// The tiny preset with two layers and a small vocabulary: quick to write.
json small_config() {
  json j = preset_config("tiny").raw;
  j["num_hidden_layers"] = 2;
  j["vocab_size"] = 512;
  return j;
}

struct Written {
  std::string int4_dir, float_dir;
};

Written write(const TempDir& tmp, const Int4ModelOptions& opt, int shards = 1) {
  Written w{tmp.file("int4"), tmp.file("float")};
  write_synthetic_int4_checkpoint(w.int4_dir, small_config(), 5, opt, shards, w.float_dir);
  return w;
}

// [out, in] of projection `name` of a config.
std::pair<int64_t, int64_t> dims(const ModelConfig& c, const std::string& proj) {
  const int64_t h = c.hidden_size, q = c.q_width(), kv = c.kv_width(), im = c.intermediate_size;
  if (proj == "self_attn.q_proj") return {q, h};
  if (proj == "self_attn.k_proj" || proj == "self_attn.v_proj") return {kv, h};
  if (proj == "self_attn.o_proj") return {h, q};
  if (proj == "mlp.down_proj") return {h, im};
  return {im, h};
}

// Every projection of every layer on every rank of TP 1, 2 and 3: int4 matmul == float matmul of
// the twin's slice.
void expect_matches_float(const Written& w) {
  const ModelConfig cfg = ModelConfig::load(w.int4_dir);
  ASSERT_TRUE(cfg.quant);
  auto int4_src = open_weight_source(w.int4_dir);
  auto float_src = open_weight_source(w.float_dir);
  auto be = make_cpu_backend({2, false});
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (int tp : {1, 2, 3}) {
    for (int rank = 0; rank < tp; ++rank) {
      const ShardPlan plan = make_shard_plan(cfg, Layout{tp, 1, {}}, rank);
      for (int64_t layer = 0; layer < cfg.num_layers; ++layer)
        for (const char* proj : kProjections) {
          const std::string prefix = "model.layers." + std::to_string(layer) + "." + proj;
          const auto [out_f, in_f] = dims(cfg, proj);
          const Slice slice = *plan.slice_for(cfg, prefix + ".weight");
          const Int4Weight q = upload_int4(
              *be, repack_int4(read_int4_linear(cfg, *int4_src, prefix, out_f, in_f, slice)));
          const int64_t rows = slice.dim == 0 ? slice.length : out_f;
          const int64_t cols = slice.dim == 1 ? slice.length : in_f;
          ASSERT_EQ(q.rows(), rows) << prefix;
          ASSERT_EQ(q.in_features, cols) << prefix;
          std::vector<float> dense(size_t(rows * cols));
          float_src->read(prefix + ".weight", slice, dense.data());
          const WeightView dv{dense.data(), DType::F32, rows, cols, nullptr};
          for (int64_t n : {1, 20}) {
            std::vector<float> x(size_t(n * cols));
            for (float& v : x) v = normal(rng);
            std::vector<float> got(size_t(n * rows)), want(size_t(n * rows));
            be->matmul_int4(x.data(), n, q.view(), nullptr, got.data());
            be->matmul(x.data(), n, dv, nullptr, want.data());
            double diff = 0, scale = 0;
            for (size_t i = 0; i < got.size(); ++i) {
              diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
              scale = std::max(scale, std::fabs(double(want[i])));
            }
            EXPECT_LT(diff, 1e-5 * scale)
                << prefix << " tp " << tp << " rank " << rank << " n " << n;
          }
        }
    }
  }
}

TEST(Int4Loader, AwqMatchesItsFloatTwin) {
  TempDir tmp;
  expect_matches_float(write(tmp, {QuantMethod::Awq, 64, false, false}, 3));
}

TEST(Int4Loader, GptqSymMatchesItsFloatTwin) {
  TempDir tmp;
  expect_matches_float(write(tmp, {QuantMethod::Gptq, 32, false, true}));
}

TEST(Int4Loader, GptqActOrderMatchesItsFloatTwin) {
  TempDir tmp;
  expect_matches_float(write(tmp, {QuantMethod::Gptq, 64, true, false}));
}

TEST(Int4Loader, GptqOneGroupMatchesItsFloatTwin) {
  TempDir tmp;
  expect_matches_float(write(tmp, {QuantMethod::Gptq, -1, true, false}));
}

TEST(Int4Loader, SplitUnitIsWholeGroups) {
  TempDir tmp;
  const Written w = write(tmp, {QuantMethod::Awq, 64, false, false});
  const ModelConfig cfg = ModelConfig::load(w.int4_dir);
  for (int rank = 0; rank < 4; ++rank) {
    const ShardPlan p = make_shard_plan(cfg, Layout{4, 1, {}}, rank);
    EXPECT_EQ(p.split_unit, 64);
    EXPECT_EQ(p.intermediate.begin % 64, 0) << rank;
  }
}

// The checkpoint of `w` rewritten into `dir` as one file, with `name` replaced by `data` of
// `shape` (same dtype), or left out when `shape` is empty.
template <class T>
void rewrite(const std::string& from, const std::string& dir, const std::string& name,
             std::vector<int64_t> shape, std::vector<T> data) {
  auto src = open_weight_source(from);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(from + "/config.json", dir + "/config.json");
  SafetensorsWriter writer;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> held;
  for (const std::string& t : src->names()) {
    if (t == name && shape.empty()) continue;
    const TensorInfo& info = src->info(t);
    auto bytes = std::make_shared<std::vector<uint8_t>>();
    std::vector<int64_t> s = info.shape;
    if (t == name) {
      bytes->resize(data.size() * sizeof(T));
      std::memcpy(bytes->data(), data.data(), bytes->size());
      s = shape;
    } else {
      bytes->resize(info.nbytes);
      src->read(t, Slice::whole(), bytes->data());
    }
    const size_t es = dtype_size(info.dtype);
    writer.add(t, info.dtype, s, [bytes, es](int64_t first, int64_t count, void* dst) {
      std::memcpy(dst, bytes->data() + size_t(first) * es, size_t(count) * es);
    });
    held.push_back(bytes);
  }
  writer.write(dir + "/" + kSingleSafetensorsName);
}

Error load_error(const std::string& dir, const std::string& prefix, int64_t out_f, int64_t in_f) {
  const ModelConfig cfg = ModelConfig::load(dir);
  auto src = open_weight_source(dir);
  try {
    read_int4_linear(cfg, *src, prefix, out_f, in_f, Slice{0, 0, out_f});
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(Err::Internal, "none");
}

TEST(Int4Loader, DamagedTensorsGetCatalogueErrors) {
  TempDir tmp;
  const Written w = write(tmp, {QuantMethod::Gptq, 64, true, false});
  const ModelConfig cfg = ModelConfig::load(w.int4_dir);
  const std::string p = "model.layers.1.mlp.up_proj";
  const int64_t N = cfg.intermediate_size, K = cfg.hidden_size, G = K / 64;

  rewrite<int32_t>(w.int4_dir, tmp.file("qweight"), p + ".qweight", {K / 8, N - 8},
                   std::vector<int32_t>(size_t(K / 8 * (N - 8))));
  Error e = load_error(tmp.file("qweight"), p, N, K);
  EXPECT_EQ(e.code(), Err::QuantTensorInvalid);
  EXPECT_NE(e.message().find(p + ".qweight"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("[24, 376]"), std::string::npos) << e.message();

  rewrite<uint16_t>(w.int4_dir, tmp.file("scales"), p + ".scales", {G + 1, N},
                    std::vector<uint16_t>(size_t((G + 1) * N)));
  e = load_error(tmp.file("scales"), p, N, K);
  EXPECT_EQ(e.code(), Err::QuantTensorInvalid);
  EXPECT_NE(e.message().find("3 groups of 64"), std::string::npos) << e.message();

  std::vector<int32_t> g_idx(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) g_idx[k] = int32_t(k / 64);
  g_idx[77] = int32_t(G);
  rewrite<int32_t>(w.int4_dir, tmp.file("g_idx"), p + ".g_idx", {K}, g_idx);
  e = load_error(tmp.file("g_idx"), p, N, K);
  EXPECT_EQ(e.code(), Err::QuantTensorInvalid);
  EXPECT_NE(e.message().find("input row 77 group 3"), std::string::npos) << e.message();

  // A NaN or infinite scale is found at load, with its place.
  std::vector<uint16_t> scales(size_t(G * N), 0x3C00);  // fp16 1.0
  for (const auto& [bits, what] : {std::pair{0x7E00, "NaN"}, {0xFC00, "an infinity"}}) {
    scales[size_t(N + 5)] = uint16_t(bits);
    rewrite<uint16_t>(w.int4_dir, tmp.file(what), p + ".scales", {G, N}, scales);
    e = load_error(tmp.file(what), p, N, K);
    EXPECT_EQ(e.code(), Err::QuantTensorInvalid);
    EXPECT_NE(e.message().find(p + ".scales"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(std::string(what) + " at [1, 5]"), std::string::npos) << e.message();
  }

  // A missing companion tensor is named.
  for (const char* part : {".qzeros", ".scales", ".g_idx"}) {
    rewrite<int32_t>(w.int4_dir, tmp.file(std::string("no") + part), p + part, {}, {});
    e = load_error(tmp.file(std::string("no") + part), p, N, K);
    EXPECT_EQ(e.code(), Err::TensorMissing) << part;
    EXPECT_NE(e.message().find(p + part), std::string::npos) << e.message();
  }

  // Bits and versions qmpi does not run are refused by the config, before any tensor is read.
  json original;
  std::ifstream(w.int4_dir + "/config.json") >> original;
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"bits", 8}, {"checkpoint_format", "marlin"}}) {
    json j = original;
    j["quantization_config"][key] = value;
    std::ofstream(w.int4_dir + "/config.json") << j.dump();
    try {
      ModelConfig::load(w.int4_dir);
      ADD_FAILURE() << key;
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), Err::QuantUnsupported) << key;
    }
  }
}

}  // namespace
}  // namespace qmpi
